//! Go's `text/tabwriter` for left-aligned text with a non-tab pad character.
//!
//! Mirrors `text/tabwriter.Writer` (`format` and `writeLines`): text is cut into lines at `'\n'`
//! and cells at `'\t'`; a tab-terminated cell belongs to a column, the last cell of a line does
//! not and is written as is. A column block is a run of consecutive lines that all have a
//! tab-terminated cell in that column; its width is `max(min_width, widest cell + padding)`, cell
//! widths counted in characters (Go counts runes). Every tab-terminated cell is padded to its
//! block's width. Differences: only `'\t'` and `'\n'` are special (no `'\v'`, `'\f'`, escapes or
//! flags), and tab padding (`padchar '\t'`, where `tabwidth` matters) is not supported; the APF
//! debug endpoints use neither.

/// The settings of a `tabwriter.Writer` with flags 0 and a non-tab pad character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TabWriter {
    /// Minimal cell width, padding included.
    pub min_width: usize,
    /// Pad characters added to the widest cell of a block.
    pub padding: usize,
    /// The pad character (not `'\t'`).
    pub pad_char: char,
}

impl TabWriter {
    /// `tabwriter.NewWriter(w, 8, 0, 1, ' ', 0)`, as `apf_controller_debug.go` makes it.
    pub const APF_DEBUG: TabWriter = TabWriter {
        min_width: 8,
        padding: 1,
        pad_char: ' ',
    };

    /// Formats `text` as writing it to the Go writer and flushing would.
    pub fn format(&self, text: &str) -> String {
        let lines: Vec<Vec<&str>> = text.split('\n').map(|l| l.split('\t').collect()).collect();
        let widths = self.column_widths(&lines);
        let mut out = String::with_capacity(text.len() * 2);
        let last = lines.len() - 1;
        for (i, (cells, widths)) in lines.iter().zip(&widths).enumerate() {
            let trailing = cells.len() - 1;
            for (cell, width) in cells[..trailing].iter().zip(widths) {
                out.push_str(cell);
                let pad = width.saturating_sub(cell.chars().count());
                out.extend(std::iter::repeat_n(self.pad_char, pad));
            }
            out.push_str(cells[trailing]);
            if i < last {
                out.push('\n');
            }
        }
        out
    }

    /// The width of every tab-terminated cell: for column `j`, the block is the maximal run of
    /// lines around the cell whose lines all have a tab-terminated cell `j`.
    fn column_widths(&self, lines: &[Vec<&str>]) -> Vec<Vec<usize>> {
        let mut widths: Vec<Vec<usize>> = lines.iter().map(|l| vec![0; l.len() - 1]).collect();
        let columns = widths.iter().map(Vec::len).max().unwrap_or(0);
        for column in 0..columns {
            let mut start = 0;
            while start < lines.len() {
                if lines[start].len() - 1 <= column {
                    start += 1;
                    continue;
                }
                let end = (start..lines.len())
                    .find(|&i| lines[i].len() - 1 <= column)
                    .unwrap_or(lines.len());
                let widest = lines[start..end]
                    .iter()
                    .map(|l| l[column].chars().count() + self.padding)
                    .max()
                    .unwrap_or(0);
                let width = widest.max(self.min_width);
                for row in &mut widths[start..end] {
                    row[column] = width;
                }
                start = end;
            }
        }
        widths
    }
}
