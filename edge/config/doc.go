// Package config is the edge's configuration file (DESIGN.md,
// "Configuration file"): the types of every key with its default
// (Default), reading a YAML file (Load, Parse, Read), values taken from
// elsewhere (${file:PATH}, ${env:NAME}), validation, and errors that name
// the file, the line and the key (Error, Locate, Problems).
//
// A configuration is validated once, where it is loaded: Load and Parse
// return a Config that Validate found valid and that says so (Validated),
// and package edge's New, NewHandler and Reload do not validate it again.
// Validate reports every problem at once; for the values a leaf owns (the
// certificates' mode, a static root, the fingerprint log, the geo
// databases, the challenge binding) it asks the leaf's own Validate or
// Parse and only says where the value was written.
//
// It imports no package of the edge (edge, its internal packages, the
// operator tools): only the leaves whose configurations it builds and
// asks (certs, challenge, fplog, geo, static), the YAML library and the
// standard library. The configuration carries only what an operator sets:
// the knobs tests turn on the edge are the edge's own.
package config
