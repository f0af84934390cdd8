package httpapi

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// The dashboard: static HTML, CSS and plain JavaScript embedded in the
// binary (no build step, nothing fetched from elsewhere), calling the JSON
// API from the browser with the token the user enters (kept in the tab's
// session storage, sent as a bearer token: no cookie, so no cross-site
// request can act with it).

//go:embed ui
var uiFiles embed.FS

// dashboardCSP allows the dashboard's own script, styles and API calls
// only: no inline script, no other origin, no framing.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// registerDashboard serves the dashboard at / and its assets under /ui/.
func (h *Handler) registerDashboard() {
	sub, _ := fs.Sub(uiFiles, "ui") // the embedded directory exists
	files := http.FileServerFS(sub)
	secure := func(w http.ResponseWriter) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", dashboardCSP)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-cache")
	}
	h.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		http.ServeFileFS(w, r, sub, "index.html")
	})
	h.mux.HandleFunc("GET /ui/{file}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		if name == "index.html" || strings.HasPrefix(name, ".") {
			writeProblem(w, r, &problem{status: http.StatusNotFound, code: "not_found", detail: "no such resource"})
			return
		}
		if _, err := fs.Stat(sub, name); err != nil {
			writeProblem(w, r, &problem{status: http.StatusNotFound, code: "not_found", detail: "no such resource"})
			return
		}
		secure(w)
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		files.ServeHTTP(w, r2)
	})
}
