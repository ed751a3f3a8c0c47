//! Byte offsets (the compiler's spans) to LSP positions (line, UTF-16
//! column) and back.

use ais_ir::Span;
use lsp_types::{Position, Range};

pub struct LineIndex<'s> {
    text: &'s str,
    /// Byte offset of the start of each line.
    starts: Vec<usize>,
}

impl<'s> LineIndex<'s> {
    pub fn new(text: &'s str) -> LineIndex<'s> {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { text, starts }
    }

    pub fn position(&self, offset: usize) -> Position {
        let offset = offset.min(self.text.len());
        let line = self
            .starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1);
        let start = self.starts[line];
        let col: usize = self
            .text
            .get(start..offset)
            .unwrap_or("")
            .chars()
            .map(char::len_utf16)
            .sum();
        Position::new(line as u32, col as u32)
    }

    pub fn range(&self, span: Span) -> Range {
        Range::new(
            self.position(span.start as usize),
            self.position(span.end as usize),
        )
    }

    /// The byte offset of `pos`, clamped to the text (a column past the end
    /// of its line is the end of the line).
    pub fn offset(&self, pos: Position) -> usize {
        let Some(&start) = self.starts.get(pos.line as usize) else {
            return self.text.len();
        };
        let end = self
            .starts
            .get(pos.line as usize + 1)
            .map_or(self.text.len(), |e| e - 1);
        let mut units = 0u32;
        for (i, c) in self.text.get(start..end).unwrap_or("").char_indices() {
            if units >= pos.character {
                return start + i;
            }
            units += c.len_utf16() as u32;
        }
        end
    }

    /// The whole text's range.
    pub fn full_range(&self) -> Range {
        Range::new(Position::new(0, 0), self.position(self.text.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_utf16_units_and_round_trip() {
        let text = "ab\n😀x\nlast";
        let idx = LineIndex::new(text);
        let x = text.find('x').unwrap_or(0);
        assert_eq!(idx.position(x), Position::new(1, 2));
        assert_eq!(idx.offset(Position::new(1, 2)), x);
        assert_eq!(idx.offset(Position::new(0, 99)), 2);
        assert_eq!(idx.offset(Position::new(9, 0)), text.len());
        assert_eq!(idx.position(text.len()), Position::new(2, 4));
    }
}
