package api

import (
	"net/http"
)

// savePin: POST /v1/pins/{id}/saves, {"board_id": ID}: save (repin) the
// pin to a board. 201 with the new pin; 200 with the board's earlier save
// of the same pin. The store refuses (403) a user token's save to another
// user's board, checked on the board row its transaction reads, and
// answers 404 for a source the board's owner may not see.
func (s *Server) savePin(w http.ResponseWriter, r *http.Request) error {
	source, err := pathID(r, "id", typePin)
	if err != nil {
		return err
	}
	var req saveRequest
	if err := decodeBody(w, r, s.maxBody, &req); err != nil {
		return err
	}
	board, err := requiredID("board_id", req.BoardID, typeBoard)
	if err != nil {
		return err
	}
	ctx := r.Context()
	o, created, err := s.creates.SavePin(ctx, source, board, actor(ctx))
	if err != nil {
		return err
	}
	return writeObject(w, createdStatus(created), o)
}
