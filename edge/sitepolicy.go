package edge

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"

	"github.com/maatproxy/maat/challenge"
	"github.com/maatproxy/maat/edge/config"
	"github.com/maatproxy/maat/policy"
)

// sitePolicy is one compiled policy and the challenger that carries its
// version and status codes (a pass earned under one policy does not pass
// another): the global policy, or a site's own (sites[].policy). Sites
// that name the same file share one.
type sitePolicy struct {
	file       string // "" = the global policy: policy:, or the built-in default
	policy     *policy.Policy
	challenger *challenge.Challenger
	maat       http.Handler // everything under /.maat/, with this challenger
}

// policyFor is the policy that decides the requests of s: its own, or the
// global one.
func (h *Handler) policyFor(s *site) *sitePolicy {
	if s != nil && s.policy != nil {
		return s.policy
	}
	return h.global
}

// buildPolicies compiles the global policy and each distinct file of
// sites[].policy, once each, and gives every site its policy.
func (h *Handler) buildPolicies() error {
	cfg := &h.cfg
	global, err := h.newSitePolicy("", cfg.Policy, "policy")
	if err != nil {
		return err
	}
	h.global = global
	byFile := map[string]*sitePolicy{}
	if cfg.Policy != "" {
		byFile[filepath.Clean(cfg.Policy)] = global
	}
	for i := range cfg.Sites {
		file := cfg.Sites[i].Policy
		if file == "" {
			continue
		}
		sp := byFile[filepath.Clean(file)]
		if sp == nil {
			if sp, err = h.newSitePolicy(file, file, fmt.Sprintf("sites[%d].policy", i)); err != nil {
				return err
			}
			byFile[filepath.Clean(file)] = sp
		}
		h.sites.list[i].policy = sp
	}
	return nil
}

// newSitePolicy compiles the policy file (or the built-in default for "")
// as key of the configuration names it, logs its warnings, and builds its
// challenger.
func (h *Handler) newSitePolicy(file, path, key string) (*sitePolicy, error) {
	p, err := loadPolicyFile(&h.cfg, path)
	if err != nil {
		return nil, &config.Error{File: h.cfg.File, Key: key, Err: err}
	}
	for _, w := range p.Warnings() {
		h.env.Log.LogAttrs(context.Background(), slog.LevelWarn, "policy_warning", slog.String("policy", path), slog.String("warning", w))
	}
	c, err := h.newChallenger(p)
	if err != nil {
		return nil, err
	}
	return &sitePolicy{file: file, policy: p, challenger: c, maat: c.Handler(challengeClient)}, nil
}
