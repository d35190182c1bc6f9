// Package pinstore holds what the whole service shares and no package
// owns: the OpenAPI contract of the HTTP API.
package pinstore

import _ "embed"

// OpenAPI is openapi.yaml, the OpenAPI 3.0 description of every route the
// API serves. The api package serves it at /openapi.yaml and renders it at
// /docs; tests prove the router and the spec agree.
//
//go:embed openapi.yaml
var OpenAPI []byte
