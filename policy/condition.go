package policy

import (
	"errors"
	"fmt"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
)

// Condition is a CEL expression over a request and the site's load that
// the edge's configuration holds outside the policy, such as
// challenge.when: `pressure > 0.5`. It sees the variables of rule
// expressions (docs/policy.md, "CEL expressions"), pressure, storm,
// upstream, cluster and load_1m/5m/15m among them, and none of the
// functions that need DNS or give a different answer each time
// (verifyFCrDNS, reverseDNS, randInt): it decides on every request, before
// any lookup. A nil *Condition is always true. It is immutable and safe for
// concurrent use.
type Condition struct {
	src      string
	prg      cel.Program
	pressure bool
}

// conditionRefused are the functions a Condition may not call, and why.
var conditionRefused = map[string]string{
	fnVerifyFCrDNS: "it needs a DNS lookup",
	fnReverseDNS:   "it needs a DNS lookup",
	"randInt":      "it answers differently each time",
}

var condEnv = sync.OnceValues(botEnv)

// CompileCondition compiles a condition. "" compiles to nil, which is
// always true. The expression must be at most MaxExpressionLen bytes,
// compile in the rule environment, return a bool, read constant keys of
// upstream that exist and call no function of conditionRefused; errors
// wrap ErrExpression.
func CompileCondition(expr string) (*Condition, error) {
	if expr == "" {
		return nil, nil
	}
	env, err := condEnv()
	if err != nil {
		return nil, err
	}
	a, prg, err := compileBoolAST(env, expr)
	if err != nil {
		return nil, err
	}
	var errs []error
	seen := map[string]bool{}
	ast.PostOrderVisit(a.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		fn := e.AsCall().FunctionName()
		if why, ok := conditionRefused[fn]; ok && !seen[fn] {
			seen[fn] = true
			errs = append(errs, fmt.Errorf("%w: %s: a condition cannot call it: %s", ErrExpression, fn, why))
		}
	}))
	facts, err := checkLoadRefs(a)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &Condition{src: expr, prg: prg, pressure: facts.pressure}, nil
}

// Eval reports whether the condition holds for r. A nil Condition holds
// always; an expression that fails at run time (a missing map key, the
// cost limit) does not hold, as a rule's does not match.
func (c *Condition) Eval(r *Request) bool {
	if c == nil {
		return true
	}
	return evalBool(c.prg, &activation{r: r})
}

// UsesPressure reports whether the condition reads pressure, storm or
// upstream, which only an edge with upstream slots fills.
func (c *Condition) UsesPressure() bool { return c != nil && c.pressure }

// String returns the expression as written; "" for nil (always true).
func (c *Condition) String() string {
	if c == nil {
		return ""
	}
	return c.src
}
