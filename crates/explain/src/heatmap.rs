//! Heat maps of code layouts: where in a binary the executed code sits.
//!
//! One panel per build. A panel's rows are 4 KiB pages (the iTLB's unit), each cut into 64
//! cells of 64 bytes (the I-cache's unit), top to bottom in address order over the range that
//! holds the functions. A cell's heat is the profile weight of the functions that overlap it,
//! each function's weight spread evenly over its bytes (a profile knows weights per function,
//! not per byte). Colour runs from pale yellow to dark red on a logarithmic scale shared by all
//! panels, so two builds of one program under one profile compare directly; code that never
//! ran is grey, bytes that hold no function symbol are white. A scattered layout shows red
//! specks over many rows; a good one shows a dense block in the first rows.
//!
//! Binaries larger than [`MAX_ROWS`] pages are drawn with several pages per row (each cell then
//! covers `64 * k` bytes), so the picture stays a few hundred pixels high. The SVG is written
//! with the `svg` crate's document builder (rectangles and text; it escapes the text and sorts
//! each element's attributes by name), so the picture is deterministic.
//!
//! Turned down: `plotters`' SVG backend. A heat map of coloured cells needs no axes or fonts,
//! and its backend writes extra attributes on every rectangle (opacity, stroke), which makes the
//! many-thousand-cell pictures of large binaries larger for nothing.

use crate::diff::{Placed, LINE, PAGE};
use svg::node::element::{Element, Rectangle};
use svg::{Document, Node as _};

/// Most rows a panel draws; larger binaries put several pages in a row.
pub const MAX_ROWS: u64 = 256;
/// Cells per row.
const COLUMNS: u64 = PAGE / LINE;
/// Side of a cell in pixels.
const CELL_PX: u64 = 5;

/// The cells of one build.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    /// Address of the first cell (a page boundary).
    pub base: u64,
    /// Bytes per cell (64 times the pages per row).
    pub cell_bytes: u64,
    /// Heat per cell; `None` where no function lies.
    pub cells: Vec<Option<f64>>,
}

impl Grid {
    /// Rows of 64 cells (one page, or several pages per row for large binaries).
    pub fn rows(&self) -> u64 {
        (self.cells.len() as u64).div_ceil(COLUMNS)
    }

    /// Rows whose cells hold the hottest `share` of the heat (rows sorted by heat).
    pub fn rows_holding(&self, share: f64) -> u64 {
        let mut rows: Vec<f64> = self
            .cells
            .chunks(COLUMNS as usize)
            .map(|r| r.iter().flatten().sum())
            .collect();
        rows.sort_by(|a, b| b.total_cmp(a));
        let total: f64 = rows.iter().sum();
        let mut acc = 0.0;
        let mut n = 0;
        for r in rows {
            if total <= 0.0 || acc >= total * share {
                break;
            }
            acc += r;
            n += 1;
        }
        n
    }
}

/// Lays `fs` out on a grid; `pages_per_row` of 0 picks the smallest that keeps the rows within
/// [`MAX_ROWS`].
pub fn grid(fs: &[Placed], pages_per_row: u64) -> Grid {
    let code: Vec<&Placed> = fs.iter().filter(|f| f.size > 0).collect();
    let lo = code.iter().map(|f| f.address).min().unwrap_or(0) / PAGE * PAGE;
    let hi = code
        .iter()
        .map(|f| f.address.saturating_add(f.size))
        .max()
        .unwrap_or(0);
    let pages = hi.saturating_sub(lo).div_ceil(PAGE).max(1);
    let per_row = if pages_per_row == 0 {
        pages.div_ceil(MAX_ROWS)
    } else {
        pages_per_row
    };
    let cell_bytes = LINE * per_row;
    let rows = pages.div_ceil(per_row);
    let mut cells: Vec<Option<f64>> = vec![None; (rows * COLUMNS) as usize];
    for f in code {
        let start = f.address - lo;
        let end = start + f.size;
        let per_byte = f.weight as f64 / f.size as f64;
        let mut c = start / cell_bytes;
        while c * cell_bytes < end && (c as usize) < cells.len() {
            let from = start.max(c * cell_bytes);
            let to = end.min((c + 1) * cell_bytes);
            let heat = cells[c as usize].get_or_insert(0.0);
            *heat += per_byte * (to - from) as f64;
            c += 1;
        }
    }
    Grid {
        base: lo,
        cell_bytes,
        cells,
    }
}

/// Colour of a cell: white without code, grey for code that never ran, else yellow to red by
/// `ln(1 + heat) / ln(1 + max)`.
fn colour(heat: Option<f64>, max: f64) -> Option<String> {
    let h = heat?;
    if h <= 0.0 || max <= 0.0 {
        return Some("#dddddd".into());
    }
    let t = ((1.0 + h).ln() / (1.0 + max).ln()).clamp(0.0, 1.0);
    // Pale yellow (255, 237, 160) to dark red (189, 0, 38).
    let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    Some(format!(
        "#{:02x}{:02x}{:02x}",
        mix(255.0, 189.0),
        mix(237.0, 0.0),
        mix(160.0, 38.0)
    ))
}

/// A `<text>` element at `(x, y)`; the content is escaped by the `svg` crate. (Its
/// `element::Text` would put the content on lines of its own; a plain element keeps it inline.)
fn text(content: &str, x: u64, y: u64) -> Element {
    let mut t = Element::new("text");
    t.assign("x", x);
    t.assign("y", y);
    t.append(svg::node::Text::new(content));
    t
}

/// An SVG with one panel per `(title, functions)`, all on one colour scale and one rows-per-page
/// scale (the largest any panel needs).
pub fn svg(panels: &[(String, Vec<Placed>)]) -> String {
    let per_row = panels
        .iter()
        .map(|(_, fs)| grid(fs, 0).cell_bytes / LINE)
        .max()
        .unwrap_or(1);
    let grids: Vec<Grid> = panels.iter().map(|(_, fs)| grid(fs, per_row)).collect();
    let max = grids
        .iter()
        .flat_map(|g| g.cells.iter().flatten())
        .fold(0.0f64, |m, &h| m.max(h));
    let rows = grids.iter().map(Grid::rows).max().unwrap_or(1);
    let panel_w = COLUMNS * CELL_PX;
    let gap = 40;
    let top = 80;
    let width = panels.len() as u64 * (panel_w + gap) + gap;
    let height = top + rows * CELL_PX + 40;
    let mut doc = Document::new()
        .set("width", width)
        .set("height", height)
        .set("font-family", "sans-serif")
        .set("font-size", 11)
        .add(
            Rectangle::new()
                .set("width", width)
                .set("height", height)
                .set("fill", "white"),
        );
    for (i, ((title, _), g)) in panels.iter().zip(&grids).enumerate() {
        let x0 = gap + i as u64 * (panel_w + gap);
        let hot_cells = g
            .cells
            .iter()
            .filter(|c| c.is_some_and(|h| h > 0.0))
            .count();
        let mut heading = text(title, x0, 16);
        heading.assign("font-weight", "bold");
        doc = doc.add(heading);
        let unit = if g.cell_bytes == LINE {
            "page".to_string()
        } else {
            format!("{} pages", g.cell_bytes / LINE)
        };
        for (k, line) in [
            format!(
                "{} rows of one {unit}; {hot_cells} cells executed",
                g.rows()
            ),
            format!("99% of the weight in {} rows", g.rows_holding(0.99)),
            format!("from {:#x}, one cell = {} B", g.base, g.cell_bytes),
        ]
        .into_iter()
        .enumerate()
        {
            doc = doc.add(text(&line, x0, 32 + 14 * k as u64));
        }
        doc = doc.add(
            Rectangle::new()
                .set("x", x0)
                .set("y", top)
                .set("width", panel_w)
                .set("height", g.rows() * CELL_PX)
                .set("fill", "none")
                .set("stroke", "#999999"),
        );
        for (k, cell) in g.cells.iter().enumerate() {
            let Some(fill) = colour(*cell, max) else {
                continue;
            };
            let (row, col) = (k as u64 / COLUMNS, k as u64 % COLUMNS);
            doc = doc.add(
                Rectangle::new()
                    .set("x", x0 + col * CELL_PX)
                    .set("y", top + row * CELL_PX)
                    .set("width", CELL_PX)
                    .set("height", CELL_PX)
                    .set("fill", fill),
            );
        }
    }
    doc = doc.add(text(
        "white: no function; grey: never executed; yellow to red: profile weight per byte \
         (log scale)",
        gap,
        height - 14,
    ));
    let mut s = doc.to_string();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(address: u64, size: u64, weight: u64) -> Placed {
        Placed {
            name: format!("f{address:x}"),
            address,
            size,
            weight,
        }
    }

    // A 128-byte function of weight 100 puts 50 in each of its two cells.
    #[test]
    fn weight_spreads_over_the_cells_a_function_covers() {
        let g = grid(&[f(0x1000, 128, 100), f(0x1080, 64, 0)], 1);
        assert_eq!(g.base, 0x1000);
        assert_eq!(g.cells[0], Some(50.0));
        assert_eq!(g.cells[1], Some(50.0));
        assert_eq!(g.cells[2], Some(0.0));
        assert_eq!(g.cells[3], None);
        assert_eq!(g.rows(), 1);
    }

    // Two pages apart: two rows each holding half; 99% needs both rows.
    #[test]
    fn rows_holding_counts_pages_of_heat() {
        let g = grid(&[f(0x1000, 64, 10), f(0x2000, 64, 10)], 1);
        assert_eq!(g.rows(), 2);
        assert_eq!(g.rows_holding(0.99), 2);
        let packed = grid(&[f(0x1000, 64, 10), f(0x1040, 64, 10)], 1);
        assert_eq!(packed.rows_holding(0.99), 1);
    }

    #[test]
    fn large_binaries_fold_pages_into_rows() {
        let g = grid(&[f(0, 64, 1), f(PAGE * 1000, 64, 1)], 0);
        assert!(g.rows() <= MAX_ROWS);
        assert_eq!(g.cell_bytes, LINE * 1001u64.div_ceil(MAX_ROWS));
    }

    #[test]
    fn svg_is_deterministic_and_escapes_titles() {
        let p = vec![("a<b>&\"c\"".to_string(), vec![f(0x1000, 100, 5)])];
        let a = svg(&p);
        assert_eq!(a, svg(&p));
        assert!(a.contains("a&lt;b&gt;&amp;\"c\""));
        assert!(!a.contains("a<b>"));
    }
}
