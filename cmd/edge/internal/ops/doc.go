// Package ops holds the offline tools of the edge command (DESIGN.md,
// "Command line"): what the commands do besides serving. They are
//
//   - policy check (CheckPolicy) and policy explain (ExplainPolicy,
//     ExplainRequestFromLog): a policy compiled as the edge compiles it,
//     and a request described by flags or by a fingerprint log line,
//     explained with the checks the live edge runs before the policy;
//   - robots2policy (RobotsToPolicy) and fp top (FPTop);
//   - config check (CheckConfig): everything `edge run` does with a
//     configuration short of listening and of writing;
//   - demo: the demo application behind `edge demo` (StartDemoUpstream;
//     its configuration is edge.DemoConfig);
//   - trust: the local CA of tls.mode: self-signed (LocalCA, InstallCA);
//   - hash-password (HashPassword).
//
// `edge version` prints edge.ReadBuildInfo, which stays in edge: the
// Server's first log line says the same.
//
// ops imports edge (with what edge exports for these tools alone, in
// edge/offline.go: the steps New takes with a configuration, each on its
// own, such as edge.LoadPolicy, edge.CheckSecret and
// edge.CheckHandler) and the leaves. The serving path never imports it:
// edge must not import ops, and only cmd/edge does.
//
// The errors it makes start with "edge: ", as the command prints them
// (DESIGN.md: a message says "edge:" once).
package ops
