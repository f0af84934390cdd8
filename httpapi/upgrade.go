package httpapi

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// upgradeRequest is the body of POST /api/v1/workflows/{name}/upgrade.
type upgradeRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
	// RunIDs, when set, moves only these runs instead of every run of the
	// version that has not settled.
	RunIDs []string `json:"run_ids"`
	// DryRun reports what would move and what would be refused, moving
	// none.
	DryRun bool `json:"dry_run"`
}

// upgrade answers POST /api/v1/workflows/{name}/upgrade: it moves the runs
// of the workflow pinned to version from that have not settled (or the
// runs named) to version to, those of the caller's tenant only for a
// tenant-scoped caller (Engine.UpgradeRuns, TenantRuns.UpgradeRuns).
func (h *Handler) upgrade(w http.ResponseWriter, r *http.Request, sc scope) error {
	name := r.PathValue("name")
	if err := check(dag.NameRule, "name", name); err != nil {
		return err
	}
	var req upgradeRequest
	if err := h.decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if req.From == "" || req.To == "" {
		return badRequest("invalid_version", "from and to are required: the versions to move runs from and to")
	}
	for _, v := range []struct{ name, value string }{{"from", req.From}, {"to", req.To}} {
		if err := check(dag.VersionRule, v.name, v.value); err != nil {
			return err
		}
	}
	switch {
	case req.From == req.To:
		return badRequest("invalid_upgrade", "from and to are the same version: runs move to another one")
	}
	var opts durable.UpgradeOptions
	opts.DryRun = req.DryRun
	for _, s := range req.RunIDs {
		id, err := parseID(s)
		if err != nil {
			return err
		}
		opts.IDs = append(opts.IDs, id)
	}
	if req.RunIDs != nil && len(opts.IDs) == 0 {
		return badRequest("invalid_id", "run_ids: list at least one run, or leave it out to move every run of the version")
	}
	vs, err := h.e.Versions(r.Context(), name)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return workflowNotFound(name)
	}
	known := func(v string) bool {
		return slices.ContainsFunc(vs, func(x durable.VersionInfo) bool { return x.Version == v })
	}
	for _, v := range []string{req.From, req.To} {
		if !known(v) {
			return unknownVersion(name, v, vs, "")
		}
	}
	res, err := sc.ops.UpgradeRuns(r.Context(), name, req.From, req.To, opts)
	if errors.Is(err, durable.ErrUnknownVersion) {
		if i := slices.IndexFunc(vs, func(x durable.VersionInfo) bool { return x.Version == req.To }); vs[i].Steps != nil {
			return &problem{status: http.StatusNotImplemented, code: "upgrade_unsupported",
				detail: "the store cannot move runs between versions", err: err}
		}
		// Known only from a live worker: no DAG to move runs to.
		return unknownVersion(name, req.To, vs, "its DAG is not known here (only a live worker lists it): "+
			"register it on this server's engine, or start a run of it first")
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, durablejson.NewUpgrade(name, req.From, req.To, sc.tenant, req.DryRun, res))
	return nil
}

// unknownVersion is the problem of an upgrade naming version v, which
// workflow has not (or, with why, cannot move runs to): it lists the
// versions known.
func unknownVersion(workflow, v string, vs []durable.VersionInfo, why string) *problem {
	p := &problem{status: http.StatusUnprocessableEntity, code: "unknown_version"}
	var list []string
	for _, x := range vs {
		p.versions = append(p.versions, x.Version)
		list = append(list, strconv.Quote(x.Version))
	}
	if why == "" {
		why = "no engine registers it here, no run recorded it and no live worker serves it"
	}
	p.detail = "workflow " + strconv.Quote(workflow) + " has no version " + strconv.Quote(v) + " to use: " + why +
		"; the versions known are " + strings.Join(list, ", ")
	return p
}
