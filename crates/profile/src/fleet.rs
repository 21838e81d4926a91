//! Fleet weighting: the effective weight of each merge input from its submission identity.
//!
//! A fleet sends many profiles of one binary: every host, every time window. Summed with equal
//! weights, a host that ran for a month and sent a thousand windows outweighs a thousand hosts
//! that sent one each, and last year's windows count as much as yesterday's. The options here
//! turn each input's command-line weight `W` into an *effective* weight from two keys of the
//! input's `meta` (see [`Submission`]):
//!
//! - `submitter` ([`META_SUBMITTER`]): who sent it (a host, a user); an input without one is
//!   its own submitter;
//! - `recorded-at` ([`META_RECORDED_AT`]): when, in integer Unix seconds UTC; an input without
//!   one is never decayed.
//!
//! With `S` the inputs of one submitter, the effective weight of input `i` is computed as
//!
//! 1. `e = W` ;
//! 2. per submitter ([`FleetOptions::per_submitter`]): `e = W / ΣS W` , so each submitter's
//!    weights sum to 1 (0 when they are all 0), however many inputs it sent;
//! 3. decay ([`FleetOptions::half_life_days`]): `e = e * 0.5^(age / (DAYS * 86400))` with
//!    `age = max(now - recorded_at, 0)` seconds; inputs without `recorded-at` keep `e`.
//!    `now` is [`FleetOptions::now`], by default the newest `recorded-at` among the inputs, so
//!    the result never depends on the clock of the machine that merges;
//! 4. cap ([`FleetOptions::cap_per_submitter`] `C`): when `T = ΣS e > C`, every input of `S`
//!    gets `e = e * (C / T)`.
//!
//! Each step is one `f64` expression in the order written, so another implementation (the SQL
//! of `integrations/sql/`) that evaluates the same expressions gets the same weights up to the
//! rounding of its sums. Sums over a submitter's inputs add the values in ascending order, so
//! the weights never depend on the order of the inputs. The effective weights then enter the
//! exact merge ([`crate::Merger`]) as the command-line weights did; with no option set they
//! are the command-line weights unchanged.
//!
//! The per-submitter divisor is the sum of the *undecayed* weights: a submitter counts as one
//! input of weight 1 times the (weight-averaged) decay of its inputs, so a host that stopped
//! sending fades out like any old input. (Dividing by the sum of the decayed weights, the
//! other reading, would make every submitter count 1 whatever the age of its data, and the
//! decay would only shift weight between one host's own windows.)
//!
//! Turned down: decaying by the merging machine's clock, which makes the same inputs give
//! different bytes on different days; and a cap on the raw weights before per-submitter
//! normalization, which per-submitter normalization would then undo.

use crate::{Error, Meta};
use std::collections::BTreeMap;

/// The `meta` key naming who sent a profile (a host name, a user id).
pub const META_SUBMITTER: &str = "submitter";
/// The `meta` key giving when a profile was recorded, in integer Unix seconds UTC.
pub const META_RECORDED_AT: &str = "recorded-at";

/// Seconds in a day, for half-lives given in days.
const DAY: f64 = 86_400.0;

/// Fleet weighting options (module documentation). The default changes nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FleetOptions {
    /// Each submitter counts as much as one input of weight 1.
    pub per_submitter: bool,
    /// Weights halve every this many days of age; finite and `> 0`.
    pub half_life_days: Option<f64>,
    /// The time ages are measured from, Unix seconds; default the newest `recorded-at`.
    pub now: Option<i64>,
    /// The most a submitter's inputs may weigh together; finite and `> 0`.
    pub cap_per_submitter: Option<f64>,
}

impl FleetOptions {
    /// True when some option changes the weights.
    pub fn is_active(&self) -> bool {
        self.per_submitter || self.half_life_days.is_some() || self.cap_per_submitter.is_some()
    }

    fn check(&self) -> Result<(), Error> {
        let positive = |v: Option<f64>| v.map_or(true, |v| v.is_finite() && v > 0.0);
        if !positive(self.half_life_days) {
            return Err(Error::BadFleetOption(
                "the half-life must be a finite number of days > 0".into(),
            ));
        }
        if !positive(self.cap_per_submitter) {
            return Err(Error::BadFleetOption(
                "the cap per submitter must be a finite number > 0".into(),
            ));
        }
        if self.now.is_some() && self.half_life_days.is_none() {
            return Err(Error::BadFleetOption(
                "`now` is only used with a half-life".into(),
            ));
        }
        Ok(())
    }
}

/// One merge input as fleet weighting sees it: its command-line weight and identity.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    /// The command-line weight `W`.
    pub weight: f64,
    /// `meta submitter`, if any.
    pub submitter: Option<String>,
    /// `meta recorded-at`, if any.
    pub recorded_at: Option<i64>,
}

/// Reads a `recorded-at` value: an integer number of Unix seconds (an optional `-`, decimal
/// digits).
pub fn parse_recorded_at(v: &str) -> Result<i64, Error> {
    let digits = v.strip_prefix('-').unwrap_or(v);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::BadMeta {
            key: META_RECORDED_AT,
            value: crate::quote(v),
            expected: "an integer number of Unix seconds",
        });
    }
    v.parse().map_err(|_| Error::BadMeta {
        key: META_RECORDED_AT,
        value: crate::quote(v),
        expected: "an integer number of Unix seconds",
    })
}

impl Submission {
    /// The submission of an input of weight `weight` and metadata `meta`. Fails on a
    /// `recorded-at` that is not an integer.
    pub fn from_meta(weight: f64, meta: &Meta) -> Result<Submission, Error> {
        Ok(Submission {
            weight,
            submitter: meta.extra.get(META_SUBMITTER).cloned(),
            recorded_at: meta
                .extra
                .get(META_RECORDED_AT)
                .map(|v| parse_recorded_at(v))
                .transpose()?,
        })
    }
}

/// The effective weights of a merge's inputs, and what the result's `meta` records of them.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetPlan {
    /// The effective weight of each input, in input order.
    pub weights: Vec<f64>,
    /// The number of distinct submitters (an input without `submitter` counts as its own).
    pub submitters: usize,
    /// The time ages were measured from, when a half-life was given and some input had a
    /// `recorded-at` (or `now` was given).
    pub now: Option<i64>,
    options: FleetOptions,
}

/// Who a submission belongs to: a named submitter, or the input itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Who<'a> {
    Named(&'a str),
    Own(usize),
}

/// Sums values in ascending order, so the sum does not depend on their order.
fn sorted_sum(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.into_iter().sum()
}

/// The decay factor `0.5^(age / half_life)` of an input recorded at `t`, ages below 0 as 0.
pub fn decay(now: i64, t: i64, half_life_days: f64) -> f64 {
    let age = now.saturating_sub(t).max(0) as f64;
    0.5f64.powf(age / (half_life_days * DAY))
}

/// Computes the effective weights of `inputs` under `options` (module documentation). Fails
/// on an invalid option or a command-line weight that is not finite and `>= 0` (naming the
/// input position).
pub fn plan(inputs: &[Submission], options: &FleetOptions) -> Result<FleetPlan, Error> {
    options.check()?;
    for (i, s) in inputs.iter().enumerate() {
        if !s.weight.is_finite() || s.weight < 0.0 {
            return Err(Error::BadWeight {
                input: i,
                weight: s.weight.to_string(),
            });
        }
    }
    let mut groups: BTreeMap<Who, Vec<usize>> = BTreeMap::new();
    for (i, s) in inputs.iter().enumerate() {
        let who = s.submitter.as_deref().map_or(Who::Own(i), Who::Named);
        groups.entry(who).or_default().push(i);
    }
    let mut weights: Vec<f64> = inputs.iter().map(|s| s.weight).collect();
    if options.per_submitter {
        for members in groups.values() {
            let total = sorted_sum(members.iter().map(|&i| inputs[i].weight).collect());
            for &i in members {
                weights[i] = if total > 0.0 {
                    inputs[i].weight / total
                } else {
                    0.0
                };
            }
        }
    }
    let mut now = None;
    if let Some(half_life) = options.half_life_days {
        now = options
            .now
            .or_else(|| inputs.iter().filter_map(|s| s.recorded_at).max());
        if let Some(now) = now {
            for (w, s) in weights.iter_mut().zip(inputs) {
                if let Some(t) = s.recorded_at {
                    *w *= decay(now, t, half_life);
                }
            }
        }
    }
    if let Some(cap) = options.cap_per_submitter {
        for members in groups.values() {
            let total = sorted_sum(members.iter().map(|&i| weights[i]).collect());
            if total > cap {
                let factor = cap / total;
                for &i in members {
                    weights[i] *= factor;
                }
            }
        }
    }
    Ok(FleetPlan {
        weights,
        submitters: groups.len(),
        now,
        options: *options,
    })
}

impl FleetPlan {
    /// Records in a merged profile's `meta` how its weights were made: `merge-submitters` when
    /// weighting by submitter or capping, `merge-half-life-days` and `merge-now` with a
    /// half-life, `merge-cap-per-submitter` with a cap. Nothing when no option was set.
    pub fn annotate(&self, meta: &mut Meta) {
        let o = &self.options;
        let mut put = |k: &str, v: String| {
            meta.extra.insert(k.to_string(), v);
        };
        if o.per_submitter || o.cap_per_submitter.is_some() {
            put("merge-submitters", self.submitters.to_string());
        }
        if let Some(h) = o.half_life_days {
            put("merge-half-life-days", h.to_string());
            if let Some(now) = self.now {
                put("merge-now", now.to_string());
            }
        }
        if let Some(c) = o.cap_per_submitter {
            put("merge-cap-per-submitter", c.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(weight: f64, who: Option<&str>, t: Option<i64>) -> Submission {
        Submission {
            weight,
            submitter: who.map(str::to_string),
            recorded_at: t,
        }
    }

    const D: i64 = 86_400;

    // No option: the command-line weights, unchanged.
    #[test]
    fn no_option_keeps_weights() {
        let inputs = [sub(2.0, Some("a"), Some(0)), sub(0.5, None, None)];
        let p = plan(&inputs, &FleetOptions::default()).unwrap();
        assert_eq!(p.weights, [2.0, 0.5]);
        assert_eq!(p.submitters, 2);
        let mut m = Meta::default();
        p.annotate(&mut m);
        assert!(m.extra.is_empty());
    }

    // Per submitter: host a's three windows share one unit in proportion to W; b's single
    // input counts 1; an input without a submitter is its own; all-zero weights stay 0.
    #[test]
    fn per_submitter_divides_by_the_submitters_sum() {
        let inputs = [
            sub(1.0, Some("a"), None),
            sub(2.0, Some("b"), None),
            sub(1.0, Some("a"), None),
            sub(2.0, Some("a"), None),
            sub(3.0, None, None),
            sub(0.0, Some("z"), None),
        ];
        let o = FleetOptions {
            per_submitter: true,
            ..FleetOptions::default()
        };
        let p = plan(&inputs, &o).unwrap();
        assert_eq!(p.weights, [0.25, 1.0, 0.25, 0.5, 1.0, 0.0]);
        assert_eq!(p.submitters, 4);
        let mut m = Meta::default();
        p.annotate(&mut m);
        assert_eq!(m.extra["merge-submitters"], "4");
    }

    // Decay: one half-life halves, two quarter; newer than now counts as age 0; no time, no
    // decay; `now` defaults to the newest time.
    #[test]
    fn decay_halves_per_half_life() {
        let inputs = [
            sub(1.0, None, Some(100 * D)),
            sub(1.0, None, Some(93 * D)),
            sub(4.0, None, Some(86 * D)),
            sub(1.0, None, None),
        ];
        let o = FleetOptions {
            half_life_days: Some(7.0),
            ..FleetOptions::default()
        };
        let p = plan(&inputs, &o).unwrap();
        assert_eq!(p.weights, [1.0, 0.5, 1.0, 1.0]);
        assert_eq!(p.now, Some(100 * D));
        let later = FleetOptions {
            now: Some(93 * D),
            ..o
        };
        let p = plan(&inputs, &later).unwrap();
        assert_eq!(p.weights, [1.0, 1.0, 2.0, 1.0]);
        let mut m = Meta::default();
        p.annotate(&mut m);
        assert_eq!(m.extra["merge-half-life-days"], "7");
        assert_eq!(m.extra["merge-now"], (93 * D).to_string());
        // Half a half-life: 2^-0.5.
        let p = plan(
            &[sub(1.0, None, Some(0))],
            &FleetOptions {
                now: Some(D),
                half_life_days: Some(2.0),
                ..o
            },
        )
        .unwrap();
        assert_eq!(p.weights, [0.5f64.powf(0.5)]);
    }

    // Per submitter then decay: a host whose windows are all old fades, it does not get its
    // unit back (the divisor is the undecayed sum).
    #[test]
    fn per_submitter_then_decay() {
        let inputs = [
            sub(1.0, Some("old"), Some(0)),
            sub(1.0, Some("old"), Some(0)),
            sub(1.0, Some("new"), Some(14 * D)),
            sub(3.0, Some("mixed"), Some(14 * D)),
            sub(1.0, Some("mixed"), Some(7 * D)),
        ];
        let o = FleetOptions {
            per_submitter: true,
            half_life_days: Some(7.0),
            ..FleetOptions::default()
        };
        let p = plan(&inputs, &o).unwrap();
        assert_eq!(p.weights, [0.125, 0.125, 1.0, 0.75, 0.125]);
    }

    // The cap scales a submitter's inputs down to C together, leaves the others; it applies
    // after per-submitter and decay.
    #[test]
    fn cap_scales_heavy_submitters() {
        let inputs = [
            sub(3.0, Some("a"), None),
            sub(1.0, Some("a"), None),
            sub(1.5, Some("b"), None),
            sub(5.0, None, None),
        ];
        let o = FleetOptions {
            cap_per_submitter: Some(2.0),
            ..FleetOptions::default()
        };
        let p = plan(&inputs, &o).unwrap();
        assert_eq!(p.weights, [1.5, 0.5, 1.5, 2.0]);
        let mut m = Meta::default();
        p.annotate(&mut m);
        assert_eq!(m.extra["merge-cap-per-submitter"], "2");
        assert_eq!(m.extra["merge-submitters"], "3");
        // Per submitter makes every sum 1: a cap of 0.5 halves them all.
        let both = FleetOptions {
            per_submitter: true,
            cap_per_submitter: Some(0.5),
            ..o
        };
        let p = plan(&inputs, &both).unwrap();
        assert_eq!(p.weights, [0.375, 0.125, 0.5, 0.5]);
    }

    // The order of the inputs changes only the order of the weights.
    #[test]
    fn order_independent() {
        let mut inputs: Vec<Submission> = (0..40)
            .map(|i| {
                sub(
                    0.1 * f64::from(i % 7) + 0.013,
                    Some(["a", "b", "c"][i as usize % 3]),
                    Some(i64::from(i) * 3_600),
                )
            })
            .collect();
        let o = FleetOptions {
            per_submitter: true,
            half_life_days: Some(0.3),
            cap_per_submitter: Some(0.4),
            now: None,
        };
        let fwd = plan(&inputs, &o).unwrap().weights;
        inputs.reverse();
        let mut back = plan(&inputs, &o).unwrap().weights;
        back.reverse();
        assert_eq!(fwd, back);
    }

    // Bad options, weights and times are refused with a message.
    #[test]
    fn bad_values_refused() {
        let one = [sub(1.0, None, None)];
        for o in [
            FleetOptions {
                half_life_days: Some(0.0),
                ..FleetOptions::default()
            },
            FleetOptions {
                half_life_days: Some(f64::NAN),
                ..FleetOptions::default()
            },
            FleetOptions {
                cap_per_submitter: Some(-1.0),
                ..FleetOptions::default()
            },
            FleetOptions {
                now: Some(5),
                ..FleetOptions::default()
            },
        ] {
            assert!(
                matches!(plan(&one, &o), Err(Error::BadFleetOption(_))),
                "{o:?}"
            );
        }
        assert!(matches!(
            plan(
                &[sub(1.0, None, None), sub(-1.0, None, None)],
                &FleetOptions::default()
            ),
            Err(Error::BadWeight { input: 1, .. })
        ));
        assert_eq!(parse_recorded_at("-12").unwrap(), -12);
        for bad in ["", "-", "1.5", "+3", "12x", "99999999999999999999"] {
            assert!(parse_recorded_at(bad).is_err(), "{bad}");
        }
        let mut m = Meta::default();
        m.extra.insert(META_RECORDED_AT.into(), "yesterday".into());
        assert_eq!(
            Submission::from_meta(1.0, &m).unwrap_err().to_string(),
            "meta recorded-at `yesterday` is not an integer number of Unix seconds"
        );
    }
}
