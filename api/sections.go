package api

import (
	"net/http"

	"github.com/pinstore/pinstore/model"
)

// Board sections: a board's named sections, in the order its owner sets,
// and the pins of each (a pin is in at most one section of its board).
// Sections are secret as their board is, so they are seen and changed as
// the board is (pathObjects on their ids); the rest is the object and
// list routes every type has.

// moveSection: PUT /v1/boards/{id}/sections/{section_id}/position, as a
// board's pins are moved by hand.
func (s *Server) moveSection(w http.ResponseWriter, r *http.Request) error {
	board, err := pathID(r, "id", typeBoard)
	if err != nil {
		return err
	}
	section, err := pathID(r, "section_id", typeSection)
	if err != nil {
		return err
	}
	before, after, err := s.moveAnchor(w, r, section, typeSection)
	if err != nil {
		return err
	}
	return noContent(w, s.mappings.Move(r.Context(), model.BoardSections, board, section, before, after))
}

// setPinSection: PUT /v1/pins/{id}/section, {"section_id": "…"} to put
// the pin in that section of its board, {"section_id": null} to take it
// out of any; idempotent. It answers the pin.
func (s *Server) setPinSection(w http.ResponseWriter, r *http.Request) error {
	pin, err := pathID(r, "id", typePin)
	if err != nil {
		return err
	}
	var req pinSectionRequest
	if err := decodeBody(w, r, s.maxBody, &req); err != nil {
		return err
	}
	var section uint64
	if req.SectionID != nil {
		if section, err = requiredID("section_id", *req.SectionID, typeSection); err != nil {
			return err
		}
	}
	o, err := s.edits.SetPinSection(r.Context(), pin, section)
	if err != nil {
		return err
	}
	return writeObject(w, http.StatusOK, o)
}
