package api

// RouteDoc is what openapi.yaml's generator (internal/specgen) reads of
// one route of the route table: its method, its chi pattern, and whether
// it is public (never behind Config.Auth, so it has no 401, 403 or 429).
type RouteDoc struct {
	Method, Pattern string
	Public          bool
}

// RouteDocs lists every route the API serves, in the route table's order.
func RouteDocs() []RouteDoc {
	table := (&Server{}).routeTable()
	out := make([]RouteDoc, len(table))
	for i, rt := range table {
		out[i] = RouteDoc{Method: rt.method, Pattern: rt.pattern, Public: rt.who.open}
	}
	return out
}
