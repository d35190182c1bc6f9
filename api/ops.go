package api

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/pinstore/pinstore/cluster/fleet"
)

// Ops is what the operational routes read: /readyz and the shard map.
type Ops interface {
	// Ready checks every host and Redis; each check names what is down.
	Ready(ctx context.Context) []fleet.Health
	// ShardMapInfo describes the shard map in force, with each host's
	// health; never a DSN.
	ShardMapInfo(ctx context.Context) fleet.ShardMapInfo
}

// decodeID: GET /v1/ids/{id}, pure arithmetic.
func (s *Server) decodeID(w http.ResponseWriter, r *http.Request) error {
	id, p, err := parseKnownID("id", chi.URLParam(r, "id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, IDInfo{ID: idString(id), Shard: p.Shard, Type: uint16(p.Type), TypeName: p.Type.String(), LocalID: p.Local})
}

// shardMap: GET /v1/admin/shard-map, the map this server routes by, its
// version and each host's health, so an operator can see that every server
// has picked up an edited map.
func (s *Server) shardMap(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, s.ops.ShardMapInfo(ctx))
}

// healthz: the process is up.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyTimeout bounds a readiness check.
const readyTimeout = 2 * time.Second

// readyz: every host and Redis answer (503 "unavailable" otherwise). A
// check turned off by configuration (Redis with PINSTORE_REDIS_DISABLED) is
// listed as disabled and does not make the server unready; a failed check
// that only degrades the server (a stale topology: it keeps serving on the
// map it has) makes it 200 "degraded".
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	checks := s.ops.Ready(ctx)
	resp := ReadyResponse{Status: "ok", Checks: checks}
	status := http.StatusOK
	for _, c := range checks {
		switch {
		case c.OK, c.Disabled:
		case c.Degrades && status == http.StatusOK:
			resp.Status = "degraded"
		case !c.Degrades:
			resp.Status, status = "unavailable", http.StatusServiceUnavailable
		}
	}
	if resp.Checks == nil {
		resp.Checks = []fleet.Health{}
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, status, resp)
}

// serveMetrics: GET /metrics, the registry in Prometheus' text format.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	s.prom.ServeHTTP(w, r)
	return nil
}

// openAPI serves the spec.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(s.spec)
	return nil
}
