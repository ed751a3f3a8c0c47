//! Many source files in one offset space, the rustc way: every loaded file
//! gets a disjoint range of global byte offsets (file k starts one past the
//! end of file k-1), so a [`Span`] stays two `u32`s and still says which
//! file it points into. A single-file program has one file at base 0, so
//! its spans are plain byte offsets as before.

use crate::Span;

/// One loaded file: its display name (a path as given, or `std/NAME.ais`
/// for the bundled library), its text, and where it starts globally.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
    pub base: u32,
}

impl SourceFile {
    /// The global offset one past this file's last byte.
    pub fn end(&self) -> u32 {
        self.base
            .saturating_add(u32::try_from(self.text.len()).unwrap_or(u32::MAX))
    }

    /// `span` (global) as a byte range into this file's text, clamped.
    pub fn local(&self, span: Span) -> std::ops::Range<usize> {
        let len = self.text.len();
        let at = |o: u32| (o.saturating_sub(self.base) as usize).min(len);
        at(span.start)..at(span.end.max(span.start))
    }
}

/// The files of one program, in load order (the entry file first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    pub fn new() -> SourceMap {
        SourceMap::default()
    }

    /// A map of one file at base 0.
    pub fn single(name: impl Into<String>, text: impl Into<String>) -> SourceMap {
        let mut m = SourceMap::new();
        m.add(name, text);
        m
    }

    /// Adds a file after the last one and returns its base offset.
    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> u32 {
        // One past the previous end, so an empty file or an end-of-file span
        // still belongs to exactly one file.
        let base = self.files.last().map_or(0, |f| f.end().saturating_add(1));
        self.files.push(SourceFile {
            name: name.into(),
            text: text.into(),
            base,
        });
        base
    }

    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The file a global offset falls in (its range `base..=end`); offsets
    /// past every file fall in the last one, so rendering never fails.
    pub fn file_at(&self, offset: u32) -> Option<&SourceFile> {
        let i = self.files.partition_point(|f| f.base <= offset);
        self.files.get(i.saturating_sub(1))
    }

    /// The file a span starts in.
    pub fn file_of(&self, span: Span) -> Option<&SourceFile> {
        self.file_at(span.start)
    }

    /// The file with this display name.
    pub fn by_name(&self, name: &str) -> Option<&SourceFile> {
        self.files.iter().find(|f| f.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_get_disjoint_ranges_and_spans_find_their_file() {
        let mut m = SourceMap::new();
        assert_eq!(m.add("a.ais", "abc"), 0);
        assert_eq!(m.add("b.ais", ""), 4);
        assert_eq!(m.add("c.ais", "xy"), 5);
        assert_eq!(m.file_at(0).map(|f| f.name.as_str()), Some("a.ais"));
        assert_eq!(m.file_at(3).map(|f| f.name.as_str()), Some("a.ais"));
        assert_eq!(m.file_at(4).map(|f| f.name.as_str()), Some("b.ais"));
        assert_eq!(m.file_at(6).map(|f| f.name.as_str()), Some("c.ais"));
        let c = m.by_name("c.ais").expect("added");
        assert_eq!(c.local(Span::new(5, 7)), 0..2);
        // Out-of-range spans clamp instead of panicking.
        assert_eq!(c.local(Span::new(99, 120)), 2..2);
    }
}
