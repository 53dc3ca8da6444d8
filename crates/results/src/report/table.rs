//! The table model the reporters fill and the renderers draw: a row is a
//! label, one cell per column and a unit; a cell is its text and its mark.
//! The text report and the HTML page draw the same [`Table`], so they show
//! the same rows; only the drawing differs.

use linerate_wire::units::Layer;

/// The unit of a rate in bits at `layer`, as every table writes it (the
/// one place it is written).
pub fn mbps(layer: Layer) -> &'static str {
    match layer {
        Layer::L1 => "Mbps (L1)",
        Layer::L2 => "Mbps (L2)",
        Layer::L3 => "Mbps (L3, IP)",
        Layer::L4 => "Mbps (L4, UDP payload)",
    }
}

/// What a figure's mark says about it (the legends are in the reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    None,
    /// `*`: the search ended against the tester's own limit.
    TesterLimited,
    /// `~`: an MLRsearch goal with a bound missing or wider than the width.
    Irregular,
}

impl Mark {
    /// The mark as printed after the figure: `*`, `~` or nothing.
    pub fn symbol(self) -> &'static str {
        match self {
            Mark::None => "",
            Mark::TesterLimited => "*",
            Mark::Irregular => "~",
        }
    }
}

/// One cell: the figure as text (`1.23M`, `-`) and its mark.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    pub text: String,
    pub mark: Mark,
}

impl Cell {
    pub fn plain(text: String) -> Cell {
        Cell {
            text,
            mark: Mark::None,
        }
    }
}

/// One row: its label (empty for a figure's second unit, `  spread` for a
/// row that qualifies the one above), a cell per column, its unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub label: String,
    pub cells: Vec<Cell>,
    pub unit: String,
}

/// A table: the column headings (frame sizes, IMIX names) and the rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
}

impl Table {
    /// Whether any cell carries `mark` (its legend belongs under the table).
    pub fn has_mark(&self, mark: Mark) -> bool {
        self.rows
            .iter()
            .any(|r| r.cells.iter().any(|c| c.mark == mark))
    }
}
