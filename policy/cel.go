package policy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/textproto"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Bounds on CEL: an expression is at most MaxExpressionLen bytes, nests at
// most celRecursionLimit deep, and costs at most celCostLimit to evaluate;
// compiling and running one takes bounded time whatever the input.
const (
	// MaxExpressionLen is the longest CEL expression a policy may hold.
	MaxExpressionLen  = 4096
	celRecursionLimit = 32
	celCostLimit      = 100_000
)

// ErrExpression reports a CEL expression that does not compile.
var ErrExpression = errors.New("policy: bad expression")

// botEnv is the CEL environment of rule expressions: Anubis's variables and
// functions plus Maat's fingerprints (ja4, hfp, h2fp; clientFamily and
// h2Family, the known-client families of the JA4 and of the HTTP/2
// fingerprint, "" when unknown) and geo facts (asn: the AS number, 0 when
// unknown; country: ISO 3166-1 alpha-2, "" when unknown).
func botEnv() (*cel.Env, error) {
	strMap := cel.MapType(cel.StringType, cel.StringType)
	return cel.NewEnv(
		cel.Variable("remoteAddress", cel.StringType),
		cel.Variable("contentLength", cel.IntType),
		cel.Variable("host", cel.StringType),
		cel.Variable("method", cel.StringType),
		cel.Variable("userAgent", cel.StringType),
		cel.Variable("path", cel.StringType),
		cel.Variable("query", strMap),
		cel.Variable("headers", strMap),
		cel.Variable("load_1m", cel.DoubleType),
		cel.Variable("load_5m", cel.DoubleType),
		cel.Variable("load_15m", cel.DoubleType),
		cel.Variable("ja4", cel.StringType),
		cel.Variable("hfp", cel.StringType),
		cel.Variable("h2fp", cel.StringType),
		cel.Variable("clientFamily", cel.StringType),
		cel.Variable("h2Family", cel.StringType),
		cel.Variable("proto", cel.StringType),
		cel.Variable("asn", cel.IntType),
		cel.Variable("country", cel.StringType),
		cel.Function("missingHeader",
			cel.Overload("missingHeader_map_string", []*cel.Type{strMap, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(func(m, k ref.Val) ref.Val {
					mm, ok := m.Value().(map[string]string)
					key, ok2 := k.Value().(string)
					if !ok || !ok2 {
						return types.NewErr("missingHeader: bad arguments")
					}
					_, has := mm[canonicalHeader(key)]
					return types.Bool(!has)
				}))),
		cel.Function("segments",
			cel.Overload("segments_string", []*cel.Type{cel.StringType}, cel.ListType(cel.StringType),
				cel.UnaryBinding(func(p ref.Val) ref.Val {
					s, _ := p.Value().(string)
					return types.DefaultTypeAdapter.NativeToValue(strings.Split(strings.TrimPrefix(s, "/"), "/"))
				}))),
		cel.Function("regexSafe",
			cel.Overload("regexSafe_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(func(p ref.Val) ref.Val {
					s, _ := p.Value().(string)
					return types.String(regexp.QuoteMeta(s))
				}))),
		cel.Function("randInt",
			cel.Overload("randInt_int", []*cel.Type{cel.IntType}, cel.IntType,
				cel.UnaryBinding(func(p ref.Val) ref.Val {
					n, _ := p.Value().(int64)
					if n <= 0 {
						return types.NewErr("randInt: n must be positive")
					}
					return types.Int(rand.Int64N(n))
				}))),
		cel.ParserRecursionLimit(celRecursionLimit),
		cel.ParserExpressionSizeLimit(MaxExpressionLen),
	)
}

// thresholdEnv is the CEL environment of threshold expressions.
func thresholdEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("weight", cel.IntType),
		cel.ParserRecursionLimit(celRecursionLimit),
		cel.ParserExpressionSizeLimit(MaxExpressionLen),
	)
}

// CompileExpression checks a rule expression as a policy would: it must be
// at most MaxExpressionLen bytes, compile in the rule environment and return
// a bool. It is exported for `edge policy check` and fuzzing.
func CompileExpression(src string) error {
	env, err := botEnv()
	if err != nil {
		return err
	}
	_, err = compileBool(env, src)
	return err
}

func compileBool(env *cel.Env, src string) (cel.Program, error) {
	_, prg, err := compileBoolAST(env, src)
	return prg, err
}

func compileBoolAST(env *cel.Env, src string) (*cel.Ast, cel.Program, error) {
	if len(src) > MaxExpressionLen {
		return nil, nil, fmt.Errorf("%w: longer than %d bytes", ErrExpression, MaxExpressionLen)
	}
	a, iss := env.Compile(src)
	if iss != nil && iss.Err() != nil {
		msg := iss.Err().Error()
		// Anubis's DNS functions do I/O inside expressions.
		for _, f := range [...]string{"arpaReverseIP", "lookupHost", "reverseDNS"} {
			if strings.Contains(msg, "'"+f+"'") {
				msg = f + " does DNS lookups inside expressions, which Maat does not; crawler verification is the fake_crawler signal. " + msg
			}
		}
		return nil, nil, fmt.Errorf("%w: %s", ErrExpression, msg)
	}
	if a.OutputType() != cel.BoolType {
		return nil, nil, fmt.Errorf("%w: %q returns %s, not bool", ErrExpression, src, a.OutputType())
	}
	prg, err := env.Program(a, cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrExpression, err)
	}
	return a, prg, nil
}

// evalBool runs a compiled expression; an error counts as false, as in
// Anubis, where a failing expression does not match.
func evalBool(prg cel.Program, act interpreter.Activation) bool {
	out, _, err := prg.Eval(act)
	if err != nil {
		return false
	}
	b, ok := out.Value().(bool)
	return ok && b
}

// activation exposes a Request to CEL, building maps only when asked.
type activation struct {
	r       *Request
	headers map[string]string
	query   map[string]string
}

func (a *activation) Parent() interpreter.Activation { return nil }

func (a *activation) ResolveName(name string) (any, bool) {
	r := a.r
	switch name {
	case "remoteAddress":
		if !r.RemoteAddr.IsValid() {
			return "", true
		}
		return r.RemoteAddr.Unmap().String(), true
	case "contentLength":
		n, _ := strconv.ParseInt(headerValue(r, "Content-Length"), 10, 64)
		return n, true
	case "host":
		return r.Host, true
	case "method":
		return r.Method, true
	case "userAgent":
		return headerValue(r, "User-Agent"), true
	case "path":
		return r.Path, true
	case "query":
		if a.query == nil {
			a.query = map[string]string{}
			v, _ := url.ParseQuery(r.RawQuery)
			for k, vs := range v {
				if len(vs) > 0 {
					a.query[k] = vs[0]
				}
			}
		}
		return a.query, true
	case "headers":
		if a.headers == nil {
			a.headers = make(map[string]string, len(r.Header))
			for k, vs := range r.Header {
				if len(vs) > 0 {
					a.headers[k] = vs[0]
				}
			}
			if r.Host != "" {
				a.headers["Host"] = r.Host
			}
		}
		return a.headers, true
	case "load_1m", "load_5m", "load_15m":
		return 0.0, true
	case "ja4":
		return r.JA4, true
	case "hfp":
		return r.HFP, true
	case "h2fp":
		return r.H2FP, true
	case "clientFamily":
		return r.ClientFamily, true
	case "h2Family":
		return r.H2Family, true
	case "proto":
		return r.Proto, true
	case "asn":
		return int64(r.ASN), true
	case "country":
		return r.Country, true
	}
	return nil, false
}

// weightPred is a threshold expression over weight reduced to comparisons,
// so that thresholds evaluate without CEL (and without allocating).
type weightPred struct {
	op   string // "_<_", "_<=_", "_>_", "_>=_", "_==_", "_!=_", "_&&_", "_||_", "true"
	k    int64
	l, r *weightPred
}

func (w *weightPred) eval(x int64) bool {
	switch w.op {
	case "_<_":
		return x < w.k
	case "_<=_":
		return x <= w.k
	case "_>_":
		return x > w.k
	case "_>=_":
		return x >= w.k
	case "_==_":
		return x == w.k
	case "_!=_":
		return x != w.k
	case "_&&_":
		return w.l.eval(x) && w.r.eval(x)
	case "_||_":
		return w.l.eval(x) || w.r.eval(x)
	case "true":
		return true
	}
	return false
}

// reduceWeight turns "weight OP int", "int OP weight" and their && / ||
// combinations into a weightPred; ok is false for anything else.
func reduceWeight(e ast.Expr) (*weightPred, bool) {
	if e.Kind() == ast.LiteralKind {
		if b, ok := e.AsLiteral().(types.Bool); ok && bool(b) {
			return &weightPred{op: "true"}, true
		}
		return nil, false
	}
	if e.Kind() != ast.CallKind {
		return nil, false
	}
	c := e.AsCall()
	args := c.Args()
	if len(args) != 2 || c.IsMemberFunction() {
		return nil, false
	}
	switch fn := c.FunctionName(); fn {
	case "_&&_", "_||_":
		l, ok1 := reduceWeight(args[0])
		r, ok2 := reduceWeight(args[1])
		return &weightPred{op: fn, l: l, r: r}, ok1 && ok2
	case "_<_", "_<=_", "_>_", "_>=_", "_==_", "_!=_":
		if isIdent(args[0], "weight") {
			if k, ok := intLit(args[1]); ok {
				return &weightPred{op: fn, k: k}, true
			}
		}
		if isIdent(args[1], "weight") {
			if k, ok := intLit(args[0]); ok {
				flip := map[string]string{"_<_": "_>_", "_<=_": "_>=_", "_>_": "_<_", "_>=_": "_<=_", "_==_": "_==_", "_!=_": "_!=_"}
				return &weightPred{op: flip[fn], k: k}, true
			}
		}
	}
	return nil, false
}

func isIdent(e ast.Expr, name string) bool {
	return e.Kind() == ast.IdentKind && e.AsIdent() == name
}

func intLit(e ast.Expr) (int64, bool) {
	if e.Kind() != ast.LiteralKind {
		return 0, false
	}
	i, ok := e.AsLiteral().(types.Int)
	return int64(i), ok
}

func canonicalHeader(k string) string { return textproto.CanonicalMIMEHeaderKey(k) }
