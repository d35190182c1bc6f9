package api

// Store is everything the API calls, for Config.Store: the small
// interfaces each declared next to the handlers that use them (objects.go,
// lists.go, owners.go, ops.go). *store.Store implements it; every method
// returns *model.Error values whose code the api maps to an HTTP status in
// one place (errors.go).
//
// Config takes one value rather than one per interface: the API serves
// one storage, and the permission checks must read the same objects and
// owner cache that the writes they guard go to. New hands each handler
// only the interface it declares.
type Store interface {
	Creator
	ObjectReader
	ObjectWriter
	Lister
	MappingWriter
	FeedReader
	EdgeReader
	OwnerCache
	Ops
	KeyUser
}
