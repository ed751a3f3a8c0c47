//! The live console: one page served from the binary at `GET /console`
//! (HTML, JS and CSS written by hand and embedded with `include_str!`: no
//! build step, nothing fetched from elsewhere). Everything it shows comes
//! from the run API: the runs list, a run's event stream, its program's
//! graph (`GET /v1/runs/{id}/graph`); its buttons call the same endpoints
//! (`cancel`, `resume` with an answer, `confirm`).
//!
//! The three files are static and hold no data, so they are answered
//! without the bearer token (a browser cannot attach one to a navigation);
//! the page asks for the token and sends it with every API request. The
//! `Host`/`Origin` checks of a server without a token still apply.

mod confirm;

pub use confirm::Asker;

const PAGE: &str = include_str!("console.html");
const SCRIPT: &str = include_str!("console.js");
const STYLE: &str = include_str!("console.css");

/// The page keeps to its own origin: its script and style only, requests
/// to this server only, and no framing (its buttons answer for runs).
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The console file at `path` with its content type, if it is one.
pub(crate) fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path.trim_end_matches('/') {
        "/console" => Some(("text/html; charset=utf-8", PAGE)),
        "/console/console.js" => Some(("text/javascript; charset=utf-8", SCRIPT)),
        "/console/console.css" => Some(("text/css; charset=utf-8", STYLE)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_only_its_own_files() {
        assert!(asset("/console").is_some_and(|(t, _)| t.starts_with("text/html")));
        assert!(asset("/console/").is_some());
        assert!(asset("/console/other.js").is_none());
        // Nothing from another origin: no CDN, no web font.
        // (The SVG namespace is a name, not a request.)
        for text in [PAGE, SCRIPT, STYLE] {
            let text = text.replace("http://www.w3.org/2000/svg", "");
            assert!(!text.contains("http://") && !text.contains("https://"));
            assert!(!text.contains("//cdn") && !text.contains("@import"));
        }
        assert!(PAGE.contains("src=\"/console/console.js\""));
        assert!(PAGE.contains("href=\"/console/console.css\""));
    }
}
