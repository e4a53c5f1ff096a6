package policy

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/functions"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
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

// The variables of the site's load, in rule, threshold and condition
// expressions: Anubis's load_1m, load_5m and load_15m (the system load
// average, Request.Load) and Maat's pressure, storm and upstream
// (Request.Pressure, Storm and Upstream). pressure, storm and upstream
// are the pressure variables (Policy.UsesPressure, Condition.UsesPressure).
const (
	varPressure = "pressure"
	varStorm    = "storm"
	varUpstream = "upstream"
)

// upstreamKeys are the keys of CEL's upstream map, all doubles.
var upstreamKeys = [...]string{"in_use", "capacity", "queue", "queue_wait_ms", "p50_ms", "p95_ms"}

// loadLib declares the load variables (cel.Lib, so that every environment
// declares them alike).
type loadLib struct{}

func (loadLib) CompileOptions() []cel.EnvOption {
	return []cel.EnvOption{
		cel.Variable("load_1m", cel.DoubleType),
		cel.Variable("load_5m", cel.DoubleType),
		cel.Variable("load_15m", cel.DoubleType),
		cel.Variable(varPressure, cel.DoubleType),
		cel.Variable(varStorm, cel.BoolType),
		cel.Variable(varUpstream, cel.MapType(cel.StringType, cel.DoubleType)),
	}
}

func (loadLib) ProgramOptions() []cel.ProgramOption { return nil }

// loadVar answers a load variable for r; up caches the upstream map.
func loadVar(r *Request, name string, up *map[string]float64) (any, bool) {
	switch name {
	case "load_1m":
		return r.Load[0], true
	case "load_5m":
		return r.Load[1], true
	case "load_15m":
		return r.Load[2], true
	case varPressure:
		return r.Pressure, true
	case varStorm:
		return r.Storm, true
	case varUpstream:
		if *up == nil {
			u := &r.Upstream
			*up = map[string]float64{
				"in_use": float64(u.InUse), "capacity": float64(u.Capacity), "queue": float64(u.Queue),
				"queue_wait_ms": u.QueueWaitMs, "p50_ms": u.P50Ms, "p95_ms": u.P95Ms,
			}
		}
		return *up, true
	}
	return nil, false
}

// exprFacts is what checkLoadRefs finds in an expression.
type exprFacts struct {
	// pressure: the expression reads pressure, storm or upstream.
	pressure bool
	// load: it reads load_1m, load_5m or load_15m.
	load bool
}

// checkLoadRefs reports whether the checked expression a reads a pressure
// variable, and refuses a constant key of upstream that is not one of
// upstreamKeys (which would fail, and so not match, on every request).
func checkLoadRefs(a *cel.Ast) (exprFacts, error) {
	var f exprFacts
	for _, ref := range a.NativeRep().ReferenceMap() {
		switch ref.Name {
		case varPressure, varStorm, varUpstream:
			f.pressure = true
		case "load_1m", "load_5m", "load_15m":
			f.load = true
		}
	}
	var errs []error
	bad := func(k string) {
		errs = append(errs, fmt.Errorf("%w: upstream has no key %q (keys: %s)", ErrExpression, k, strings.Join(upstreamKeys[:], ", ")))
	}
	ast.PostOrderVisit(a.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.SelectKind:
			s := e.AsSelect()
			if isIdent(s.Operand(), varUpstream) && !slices.Contains(upstreamKeys[:], s.FieldName()) {
				bad(s.FieldName())
			}
		case ast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != "_[_]" || len(c.Args()) != 2 || !isIdent(c.Args()[0], varUpstream) || c.Args()[1].Kind() != ast.LiteralKind {
				return
			}
			if k, ok := c.Args()[1].AsLiteral().(types.String); ok && !slices.Contains(upstreamKeys[:], string(k)) {
				bad(string(k))
			}
		}
	}))
	return f, errors.Join(errs...)
}

// botEnv is the CEL environment of rule expressions: Anubis's
// (lib/policy/expressions BotEnvironment: its variables, functions and the
// strings extension) plus Maat's fingerprints (ja4, hfp, h2fp; clientFamily and
// h2Family, the known-client families of the JA4 and of the HTTP/2
// fingerprint, "" when unknown) and geo facts (asn: the AS
// number, 0 when unknown; country: ISO 3166-1 alpha-2, "" when unknown)
// and the site's load (loadLib) and the client's cluster.
// verifyFCrDNS and reverseDNS are late-bound: the activation answers them
// from Request.FCrDNS.
func botEnv() (*cel.Env, error) {
	strMap := cel.MapType(cel.StringType, cel.StringType)
	return cel.NewEnv(
		ext.Strings(ext.StringsLocale("en_US"), ext.StringsValidateFormatCalls(true)),
		cel.DefaultUTCTimeZone(true),
		cel.Variable("remoteAddress", cel.StringType),
		cel.Variable("contentLength", cel.IntType),
		cel.Variable("host", cel.StringType),
		cel.Variable("method", cel.StringType),
		cel.Variable("userAgent", cel.StringType),
		cel.Variable("path", cel.StringType),
		cel.Variable("query", strMap),
		cel.Variable("headers", strMap),
		cel.Lib(loadLib{}),
		cel.Variable("cluster", cel.StringType),
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
					mm, ok := m.(traits.Indexer)
					if !ok {
						return types.NewErr("missingHeader: headers is not a map")
					}
					// As Anubis: the name as written (headers holds
					// canonical names: "Accept", "User-Agent").
					return types.Bool(types.IsError(mm.Get(k)))
				}))),
		cel.Function("segments",
			cel.Overload("segments_string", []*cel.Type{cel.StringType}, cel.ListType(cel.StringType),
				cel.UnaryBinding(func(p ref.Val) ref.Val {
					s, _ := p.Value().(string)
					if !strings.HasPrefix(s, "/") {
						return types.NewErr("segments: path does not start with /")
					}
					return types.NewStringList(types.DefaultTypeAdapter, strings.Split(s, "/")[1:])
				}))),
		cel.Function("regexSafe",
			cel.Overload("regexSafe_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(func(p ref.Val) ref.Val {
					s, _ := p.Value().(string)
					return types.String(regexSafe(s))
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
		cel.Function("arpaReverseIP",
			cel.Overload("arpaReverseIP_string", []*cel.Type{cel.StringType}, cel.StringType,
				cel.UnaryBinding(func(p ref.Val) ref.Val {
					s, _ := p.Value().(string)
					r, err := arpaReverseIP(s)
					if err != nil {
						return types.NewErr("arpaReverseIP: %v", err)
					}
					return types.String(r)
				}))),
		cel.Function("verifyFCrDNS",
			cel.Overload(fnVerifyFCrDNS+"_string", []*cel.Type{cel.StringType}, cel.BoolType, cel.LateFunctionBinding()),
			cel.Overload(fnVerifyFCrDNS+"_string_string", []*cel.Type{cel.StringType, cel.StringType}, cel.BoolType, cel.LateFunctionBinding())),
		cel.Function("reverseDNS",
			cel.Overload(fnReverseDNS+"_string", []*cel.Type{cel.StringType}, cel.ListType(cel.StringType), cel.LateFunctionBinding())),
		cel.ParserRecursionLimit(celRecursionLimit),
		cel.ParserExpressionSizeLimit(MaxExpressionLen),
	)
}

// Anubis's DNS functions that Maat answers from Request.FCrDNS.
const (
	fnVerifyFCrDNS = "verifyFCrDNS"
	fnReverseDNS   = "reverseDNS"
)

// regexSafe escapes s as Anubis's regexSafe does (the same characters, in
// the same order, so that the string is the same, not only the regexp).
func regexSafe(s string) string {
	for _, c := range [...]string{"\\", ".", ":", "*", "?", "-", "[", "]", "(", ")", "+", "{", "}", "|", "^", "$"} {
		s = strings.ReplaceAll(s, c, "\\"+c)
	}
	return s
}

// arpaReverseIP writes an address in the reverse order of the in-addr.arpa
// and ip6.arpa names, as Anubis's arpaReverseIP: "1.2.3.4" becomes
// "4.3.2.1", an IPv6 address its 32 nibbles reversed and joined by dots.
func arpaReverseIP(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return "", errors.New("invalid IP address")
	}
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		return fmt.Sprintf("%d.%d.%d.%d", b[3], b[2], b[1], b[0]), nil
	}
	b := a.As16()
	h := hex.EncodeToString(b[:])
	var sb strings.Builder
	for i := len(h) - 1; i >= 0; i-- {
		sb.WriteByte(h[i])
		if i > 0 {
			sb.WriteByte('.')
		}
	}
	return sb.String(), nil
}

// thresholdEnv is the CEL environment of threshold expressions.
// Besides weight, a threshold reads the site's load (loadLib): pressure,
// storm, upstream and load_1m/5m/15m.
func thresholdEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("weight", cel.IntType),
		cel.Lib(loadLib{}),
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
		if strings.Contains(msg, "no matching overload") && (strings.Contains(msg, "(double, int)") || strings.Contains(msg, "(int, double)")) {
			msg = "pressure, load_1m/5m/15m and upstream's values are doubles and CEL does not compare a double with an int: write 0.5, 10.0 (as in Anubis: end the number in .0). " + msg
		}
		if strings.Contains(msg, "'lookupHost'") {
			msg = "lookupHost (Anubis v1.24.0) looks up names computed inside the expression, which Maat does not do; verifyFCrDNS(remoteAddress, pattern) and reverseDNS(remoteAddress) are supported. " + msg
		}
		return nil, nil, fmt.Errorf("%w: %s", ErrExpression, msg)
	}
	if a.OutputType() != cel.BoolType {
		if a.OutputType() == cel.DoubleType || a.OutputType() == cel.IntType {
			return nil, nil, fmt.Errorf("%w: %q returns %s, not bool (compare it: pressure > 0.5)", ErrExpression, src, a.OutputType())
		}
		return nil, nil, fmt.Errorf("%w: %q returns %s, not bool", ErrExpression, src, a.OutputType())
	}
	// OptOptimize, as Anubis compiles: constant regular expressions of
	// matches() are compiled once, not on every evaluation.
	prg, err := env.Program(a, cel.CostLimit(celCostLimit), cel.InterruptCheckFrequency(100), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrExpression, err)
	}
	return a, prg, nil
}

// evalBool runs a compiled expression. A run-time error (a missing map
// key, a bad regular expression, a cost limit) counts as false: the rule
// does not match, and evaluation goes on. Anubis instead fails the whole
// request: its check returns the error and the visitor gets a 500 page;
// Maat does not answer a visitor with an error for a fault of the policy,
// and `edge policy check` cannot find such faults ahead of time either.
func evalBool(prg cel.Program, act interpreter.Activation) bool {
	out, _, err := prg.Eval(act)
	if err != nil {
		return false
	}
	b, ok := out.Value().(bool)
	return ok && b
}

// activation exposes a Request to CEL, building maps only when asked, and
// answers the late-bound DNS functions from Request.FCrDNS.
type activation struct {
	p        *Policy
	r        *Request
	headers  map[string]string
	query    map[string]string
	upstream map[string]float64
	// weight is the weight a threshold expression reads.
	weight int64
	// needDNS: an expression called verifyFCrDNS or reverseDNS while
	// r.FCrDNS was not checked.
	needDNS bool
}

func (a *activation) Parent() interpreter.Activation { return nil }

// ResolveFunction answers Anubis's DNS functions
// (interpreter.FunctionActivation).
func (a *activation) ResolveFunction(name string) (functions.LateBoundOp, bool) {
	switch name {
	case fnVerifyFCrDNS:
		return a.verifyFCrDNS, true
	case fnReverseDNS:
		return a.reverseDNS, true
	}
	return nil, false
}

// verifyFCrDNS is Anubis's verifyFCrDNS(addr[, pattern]) for the request's
// address (the compiler accepts no other first argument).
func (a *activation) verifyFCrDNS(_ string, args ...ref.Val) ref.Val {
	f := &a.r.FCrDNS
	if !f.Checked {
		a.needDNS = true
		return types.False
	}
	if len(args) < 2 {
		return types.Bool(f.verify(nil))
	}
	pat, _ := args[1].Value().(string)
	re := a.p.dnsPatterns[pat]
	if re == nil {
		var err error
		if re, err = regexp.Compile(pat); err != nil {
			return types.False // Anubis: an invalid pattern fails the check
		}
	}
	return types.Bool(f.verify(re))
}

// reverseDNS is Anubis's reverseDNS(addr) for the request's address: its
// PTR names without the final dot, none when the lookup failed.
func (a *activation) reverseDNS(_ string, _ ...ref.Val) ref.Val {
	f := &a.r.FCrDNS
	if !f.Checked {
		a.needDNS = true
	}
	return types.NewStringList(types.DefaultTypeAdapter, f.Names)
}

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
		// As Anubis's URLValues: every parameter, its values joined by ",".
		if a.query == nil {
			v, _ := url.ParseQuery(r.RawQuery)
			a.query = joinValues(v)
		}
		return a.query, true
	case "headers":
		// As Anubis's HTTPHeaders: the request's header as net/http holds
		// it (canonical names; no Host, which net/http moves out), the
		// values of a repeated header joined by ",".
		if a.headers == nil {
			a.headers = joinValues(r.Header)
		}
		return a.headers, true
	case "load_1m", "load_5m", "load_15m", varPressure, varStorm, varUpstream:
		return loadVar(r, name, &a.upstream)
	case "cluster":
		return r.Cluster, true
	case "weight":
		return a.weight, true
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
// Besides weight, it reads storm: "storm" and "!storm" are leaves.
type weightPred struct {
	op   string // "_<_", "_<=_", "_>_", "_>=_", "_==_", "_!=_", "_&&_", "_||_", "true", "storm", "!storm"
	k    int64
	l, r *weightPred
}

func (w *weightPred) eval(x int64, storm bool) bool {
	switch w.op {
	case "storm":
		return storm
	case "!storm":
		return !storm
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
		return w.l.eval(x, storm) && w.r.eval(x, storm)
	case "_||_":
		return w.l.eval(x, storm) || w.r.eval(x, storm)
	case "true":
		return true
	}
	return false
}

// reduceWeight turns "weight OP int", "int OP weight", storm, !storm and
// their && / || combinations into a weightPred; ok is false for anything
// else.
func reduceWeight(e ast.Expr) (*weightPred, bool) {
	if isIdent(e, varStorm) {
		return &weightPred{op: "storm"}, true
	}
	if e.Kind() == ast.CallKind && e.AsCall().FunctionName() == "!_" && len(e.AsCall().Args()) == 1 && isIdent(e.AsCall().Args()[0], varStorm) {
		return &weightPred{op: "!storm"}, true
	}
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

// joinValues flattens a header or query: each key's values joined by ",".
func joinValues[M ~map[string][]string](m M) map[string]string {
	out := make(map[string]string, len(m))
	for k, vs := range m {
		out[k] = strings.Join(vs, ",")
	}
	return out
}

func canonicalHeader(k string) string { return textproto.CanonicalMIMEHeaderKey(k) }
