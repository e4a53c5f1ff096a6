package httpfp

// SpecHFP is specHFP, for the tests of package httpfp_test: the header
// fingerprint computed independently of HFP.
func SpecHFP(p Proto, names []string) (hfp, hfpr string) { return specHFP(p, names) }
