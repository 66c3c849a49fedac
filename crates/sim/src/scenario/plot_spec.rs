//! `[plot]`: what a sweep's charts show first (the paper's schedulers and controls, the
//! paper's x axis), so that a figure compares a few lines and the rest go to a second chart.

use serde::Deserialize;

/// How `pcdn sim --plot` draws a sweep. Without `[plot]` every row is one line of one chart.
#[derive(Clone, Debug, PartialEq)]
pub struct PlotSpec {
    /// The schedulers of the main charts, in legend order (`None`: every scheduler). Rows of
    /// the others are drawn in a second chart per metric, `NAME-all.png`, with every line.
    pub schedulers: Option<Vec<String>>,
    /// The congestion controls of the main charts (`None`: every control of the rows).
    pub ccs: Option<Vec<String>>,
    /// The x axis' title, e.g. the paper's "RTT of path 2 (ms)" (`None`: the swept key and
    /// its unit).
    pub x_label: Option<String>,
    /// Factor applied to numeric sweep values on the x axis, e.g. 2 to show a one-way delay
    /// as the round-trip time the paper plots.
    pub x_scale: f64,
}

impl Default for PlotSpec {
    fn default() -> PlotSpec {
        PlotSpec {
            schedulers: None,
            ccs: None,
            x_label: None,
            x_scale: 1.0,
        }
    }
}

impl PlotSpec {
    /// Whether the main charts leave some rows out, so a second chart with all of them is due.
    pub fn selects(&self) -> bool {
        self.schedulers.is_some() || self.ccs.is_some()
    }

    /// Whether a row of `scheduler` under `cc` is drawn in the main charts.
    pub fn shows(&self, scheduler: &str, cc: &str) -> bool {
        let keeps = |list: &Option<Vec<String>>, name: &str| list.as_ref().is_none_or(|l| l.iter().any(|n| n == name));
        keeps(&self.schedulers, scheduler) && keeps(&self.ccs, cc)
    }
}

/// `[plot]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlot {
    schedulers: Option<Vec<String>>,
    cc: Option<Vec<String>>,
    x_label: Option<String>,
    x_scale: Option<f64>,
}

impl RawPlot {
    /// Checks the lists against the `[client]` lists they select from; an error is the dotted
    /// key and what was expected.
    pub(super) fn check(self, schedulers: &[String], ccs: &[String]) -> Result<PlotSpec, (&'static str, String)> {
        let subset = |key: &'static str, list: &Option<Vec<String>>, of: &[String], client_key: &str| {
            let Some(list) = list else { return Ok(()) };
            if list.is_empty() {
                return Err((key, format!("expected at least one name of {client_key}")));
            }
            match list.iter().find(|n| !of.contains(n)) {
                Some(n) => Err((
                    key,
                    format!(
                        "\"{n}\" is not in {client_key} ({}), so it has no rows to draw",
                        of.join(", ")
                    ),
                )),
                None => Ok(()),
            }
        };
        subset("plot.schedulers", &self.schedulers, schedulers, "client.schedulers")?;
        subset("plot.cc", &self.cc, ccs, "client.cc")?;
        let x_scale = self.x_scale.unwrap_or(1.0);
        if !(x_scale.is_finite() && x_scale > 0.0) {
            return Err(("plot.x_scale", format!("expected a positive number, got {x_scale}")));
        }
        Ok(PlotSpec {
            schedulers: self.schedulers,
            ccs: self.cc,
            x_label: self.x_label,
            x_scale,
        })
    }
}
