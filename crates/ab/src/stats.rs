//! The statistics of an A/B comparison: pure functions over slices of samples, no I/O.
//!
//! For one metric measured `n_a` times on command A and `n_b` times on command B:
//! - location: [`median`] (robust to the occasional descheduled run) and [`mean`];
//! - spread: the sample standard deviation [`sample_sd`] (divisor `n - 1`);
//! - significance: [`welch`], Welch's unequal-variances t-test (B. L. Welch, "The
//!   generalization of Student's problem when several different population variances are
//!   involved", Biometrika 34, 1947). The degrees of freedom come from the Welch–Satterthwaite
//!   equation, and the two-sided p-value from the Student-t distribution, whose CDF is the
//!   regularized incomplete beta function `I_x(df/2, 1/2)` at `x = df / (df + t²)`
//!   (Abramowitz & Stegun 26.7.1 and 26.5.27). The distribution comes from the `statrs` crate
//!   ([`student_t_cdf`] and [`student_t_quantile`] are thin wrappers over its `StudentsT`);
//! - the size of the effect: [`ratio_ci`], the ratio of means B/A with a 95% confidence interval
//!   by the delta method on the log-ratio: `ln(m_b/m_a)` has variance about
//!   `s_a²/(n_a m_a²) + s_b²/(n_b m_b²)`, and the interval `exp(ln R ± t·se)` uses the Student-t
//!   quantile with Welch–Satterthwaite degrees of freedom on those relative variances. Unlike
//!   Fieller's theorem it always gives a finite interval, and unlike a bootstrap it needs no seed;
//!   it assumes positive means, which every metric here has (a zero mean gives no ratio);
//! - the paired view: [`paired_ratio`]. The runner interleaves A and B, so run `i` of A and run
//!   `i` of B ran next to each other and share whatever the machine was doing then (another
//!   tenant, a frequency step). On a shared machine that slow drift is most of the run-to-run
//!   spread, and the unpaired interval above counts it twice. The paired t-test (Student, 1908)
//!   on the log-ratios `d_i = ln(b_i / a_i)` cancels it: the ratio is `exp(mean d)`, the
//!   geometric mean of the per-pair ratios, with the interval `exp(mean d ± t·s_d/√n)`, `t` the
//!   Student-t quantile with `n - 1` degrees of freedom;
//! - a robust cross-check: [`bootstrap_median_ratio`], a seeded percentile bootstrap of the
//!   ratio of medians (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 13),
//!   for when a few outlier runs make the mean misleading;
//! - "how many sigmas": [`sigmas`], `(mean_b - mean_a) / pooled sd` (Cohen's d), the difference
//!   in units of the run-to-run noise.
//!
//! The special functions (log-gamma, the incomplete beta and its inverse) are `statrs`'s, built
//! without default features so that only `approx` and `num-traits` come with it; the tests below
//! still pin them to closed forms (df = 1 is the Cauchy distribution, df = 2 has an algebraic CDF)
//! and to table values.
//!
//! Kept by hand: the bootstrap. `statrs` has none, and a general one (with `rand`) would change
//! the intervals printed for a given `--seed`; SplitMix64 is ten lines and reproduces a seed on
//! every platform.

use statrs::distribution::{Continuous, ContinuousCDF, StudentsT};

/// Median of `xs` (mean of the two middle values for an even count); `None` when empty.
/// NaNs are ordered by `f64::total_cmp`, so the result is deterministic for any input.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Arithmetic mean; `None` when empty.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        None
    } else {
        Some(xs.iter().sum::<f64>() / xs.len() as f64)
    }
}

/// Sample variance with Bessel's correction (divisor `n - 1`); `None` for fewer than 2 values.
pub fn sample_variance(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    Some(xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64)
}

/// Sample standard deviation (divisor `n - 1`); `None` for fewer than 2 values.
pub fn sample_sd(xs: &[f64]) -> Option<f64> {
    sample_variance(xs).map(f64::sqrt)
}

/// Pooled standard deviation of two samples:
/// `sqrt(((n_a-1) s_a² + (n_b-1) s_b²) / (n_a + n_b - 2))`; `None` if either has fewer than 2.
pub fn pooled_sd(a: &[f64], b: &[f64]) -> Option<f64> {
    let (va, vb) = (sample_variance(a)?, sample_variance(b)?);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    Some((((na - 1.0) * va + (nb - 1.0) * vb) / (na + nb - 2.0)).sqrt())
}

/// `(mean_b - mean_a) / pooled_sd`: the difference in units of run-to-run noise.
/// `None` when undefined (fewer than 2 runs, or no noise at all).
pub fn sigmas(a: &[f64], b: &[f64]) -> Option<f64> {
    let sd = pooled_sd(a, b)?;
    if sd == 0.0 {
        return None;
    }
    Some((mean(b)? - mean(a)?) / sd)
}

/// Result of Welch's t-test of B against A.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Welch {
    /// `(mean_b - mean_a) / sqrt(s_a²/n_a + s_b²/n_b)`.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Welch–Satterthwaite degrees of freedom for two variance-of-mean terms `u = s²/n` with
/// `n - 1` degrees of freedom each.
fn satterthwaite(ua: f64, na: f64, ub: f64, nb: f64) -> f64 {
    (ua + ub).powi(2) / (ua * ua / (na - 1.0) + ub * ub / (nb - 1.0))
}

/// Welch's t-test. `None` for fewer than 2 runs on a side, or when both samples have zero
/// variance (the statistic is undefined: identical constant samples, or constants that differ,
/// which no test is needed to tell apart).
pub fn welch(a: &[f64], b: &[f64]) -> Option<Welch> {
    let (va, vb) = (sample_variance(a)?, sample_variance(b)?);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (ua, ub) = (va / na, vb / nb);
    if ua + ub == 0.0 {
        return None;
    }
    let t = (mean(b)? - mean(a)?) / (ua + ub).sqrt();
    let df = satterthwaite(ua, na, ub, nb);
    let p = 2.0 * (1.0 - student_t_cdf(t.abs(), df));
    Some(Welch { t, df, p })
}

/// A ratio with its 95% confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatioCi {
    /// The point estimate.
    pub ratio: f64,
    /// Lower end of the 95% interval.
    pub low: f64,
    /// Upper end of the 95% interval.
    pub high: f64,
}

/// Ratio of means `mean_b / mean_a` with a 95% CI by the log-ratio delta method (module
/// docs). `None` with fewer than 2 runs on a side or a non-positive mean.
pub fn ratio_ci(a: &[f64], b: &[f64]) -> Option<RatioCi> {
    let (ma, mb) = (mean(a)?, mean(b)?);
    let (va, vb) = (sample_variance(a)?, sample_variance(b)?);
    if ma <= 0.0 || mb <= 0.0 {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (ua, ub) = (va / (na * ma * ma), vb / (nb * mb * mb));
    let ratio = mb / ma;
    if ua + ub == 0.0 {
        return Some(RatioCi {
            ratio,
            low: ratio,
            high: ratio,
        });
    }
    let se = (ua + ub).sqrt();
    let q = student_t_quantile(0.975, satterthwaite(ua, na, ub, nb));
    Some(RatioCi {
        ratio,
        low: ratio * (-q * se).exp(),
        high: ratio * (q * se).exp(),
    })
}

/// The paired comparison: the geometric mean of the per-pair ratios `b_i / a_i` with its 95%
/// interval and two-sided p-value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Paired {
    /// `exp(mean(ln b_i - ln a_i))` with its interval.
    pub ratio: RatioCi,
    /// Two-sided p-value of the paired t-test on the log-ratios; `None` when every pair has
    /// the same ratio (no spread to test against).
    pub p: Option<f64>,
}

/// The paired t-test on log-ratios (module docs): run `i` of A and run `i` of B are a pair,
/// adjacent in time. `None` when the sides differ in length, with fewer than 2 pairs, or when
/// a value is not positive.
pub fn paired_ratio(a: &[f64], b: &[f64]) -> Option<Paired> {
    if a.len() != b.len() || a.iter().chain(b).any(|&x| x <= 0.0 || !x.is_finite()) {
        return None;
    }
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| (y / x).ln()).collect();
    let (md, vd) = (mean(&d)?, sample_variance(&d)?);
    let ratio = md.exp();
    let n = d.len() as f64;
    let se = (vd / n).sqrt();
    if se == 0.0 {
        let ratio = RatioCi {
            ratio,
            low: ratio,
            high: ratio,
        };
        return Some(Paired { ratio, p: None });
    }
    let q = student_t_quantile(0.975, n - 1.0);
    let p = 2.0 * (1.0 - student_t_cdf((md / se).abs(), n - 1.0));
    Some(Paired {
        ratio: RatioCi {
            ratio,
            low: (md - q * se).exp(),
            high: (md + q * se).exp(),
        },
        p: Some(p),
    })
}

/// Number of bootstrap resamples: 2000 is Efron & Tibshirani's advice for percentile
/// intervals (ch. 19); more moves the 2.5%/97.5% ends by less than the run-to-run noise of
/// the metrics measured here.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): a tiny, well-mixed generator whose whole state is the seed, so a seed
/// reproduces a bootstrap exactly on every platform.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform index below `n` by Lemire's multiply-shift (bias below n / 2^64,
    /// negligible for samples of a few hundred runs).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// Ratio of medians `median_b / median_a` with a 95% percentile-bootstrap interval from
/// [`BOOTSTRAP_RESAMPLES`] resamples drawn with `seed`: A and B are each resampled with
/// replacement, and the 2.5% and 97.5% order statistics of the resampled ratios are the ends.
/// Resamples whose A median is 0 are skipped. `None` when a side is empty, the median of A is
/// not positive, or every resample was skipped.
pub fn bootstrap_median_ratio(a: &[f64], b: &[f64], seed: u64) -> Option<RatioCi> {
    let (ma, mb) = (median(a)?, median(b)?);
    if ma <= 0.0 {
        return None;
    }
    let mut rng = SplitMix64(seed);
    let mut ratios = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let (mut ra, mut rb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for x in ra.iter_mut() {
            *x = a[rng.below(a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[rng.below(b.len())];
        }
        let (sa, sb) = (median(&ra)?, median(&rb)?);
        if sa > 0.0 {
            ratios.push(sb / sa);
        }
    }
    if ratios.is_empty() {
        return None;
    }
    ratios.sort_by(f64::total_cmp);
    // Percentile ends: the order statistics at ranks round(0.025 (m-1)) and round(0.975 (m-1)).
    let at = |q: f64| ratios[(q * (ratios.len() - 1) as f64).round() as usize];
    Some(RatioCi {
        ratio: mb / ma,
        low: at(0.025),
        high: at(0.975),
    })
}

/// The standard Student-t distribution (location 0, scale 1) with `df` degrees of freedom;
/// `None` when `df` is not positive or NaN.
fn students_t(df: f64) -> Option<StudentsT> {
    StudentsT::new(0.0, 1.0, df).ok()
}

/// CDF of Student's t distribution with `df > 0` degrees of freedom (A&S 26.7.1):
/// for `t ≥ 0`, `1 - I_x(df/2, 1/2) / 2` with `x = df / (df + t²)`; symmetric for `t < 0`.
/// NaN for a NaN argument or a `df` that is not positive.
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    match students_t(df) {
        Some(d) if !t.is_nan() => d.cdf(t),
        _ => f64::NAN,
    }
}

/// Newton steps that polish `statrs`'s quantile. Its inverse incomplete beta drifts for large
/// degrees of freedom (the 97.5% point at df = 10⁶ comes out 1.95985 instead of 1.95997); two
/// steps of Newton's method on the CDF, whose slope is the density, bring every df back to
/// the CDF's own accuracy (about 1e-14).
const QUANTILE_NEWTON_STEPS: usize = 2;

/// Quantile of Student's t for probability `p` in (0, 1): the `t` with `cdf(t) = p`, from
/// `statrs`'s inverse CDF polished by `QUANTILE_NEWTON_STEPS` Newton steps. NaN outside
/// (0, 1) or for a `df` that is not positive.
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    if p.is_nan() || p <= 0.0 || p >= 1.0 {
        return f64::NAN;
    }
    let Some(d) = students_t(df) else {
        return f64::NAN;
    };
    let mut t = d.inverse_cdf(p);
    for _ in 0..QUANTILE_NEWTON_STEPS {
        let slope = d.pdf(t);
        if slope.is_nan() || slope <= 0.0 {
            break;
        }
        t -= (d.cdf(t) - p) / slope;
    }
    t
}

/// Most ways of splitting the pooled samples that [`permutation_p`] enumerates exactly; above
/// it, it draws [`PERMUTATION_DRAWS`] random splits.
pub const PERMUTATION_EXACT_MAX: u64 = 200_000;

/// Random splits drawn by [`permutation_p`] when there are too many to enumerate.
pub const PERMUTATION_DRAWS: usize = 20_000;

/// Two-sided p-value of the permutation test of the difference of means (Fisher, "The Design
/// of Experiments", 1935, sec. 21; Good, "Permutation, Parametric and Bootstrap Tests of
/// Hypotheses", 2005, ch. 3): under the hypothesis that A and B are the same population, every
/// split of the pooled `n_a + n_b` values into groups of `n_a` and `n_b` is as likely as the
/// observed one, so the p-value is the share of splits whose `|mean_b - mean_a|` is at least
/// the observed one. Exact (every split, the observed one included) when there are at most
/// [`PERMUTATION_EXACT_MAX`] splits; otherwise [`PERMUTATION_DRAWS`] random splits drawn with
/// `seed`, `p = (1 + hits) / (1 + draws)`. It assumes nothing about the distribution, which
/// suits a handful of layouts whose metric jumps when one loop straddles a line; its smallest
/// possible value is `2 / C(n_a + n_b, n_a)` (4 layouts a side: 0.029). `None` when a side is
/// empty.
pub fn permutation_p(a: &[f64], b: &[f64], seed: u64) -> Option<f64> {
    let (na, nb) = (a.len(), b.len());
    if na == 0 || nb == 0 {
        return None;
    }
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let total: f64 = pooled.iter().sum();
    let n = pooled.len();
    // |mean of the rest - mean of the group of n_a| for a group summing to `s`.
    let diff = |s: f64| ((total - s) / nb as f64 - s / na as f64).abs();
    let observed = diff(a.iter().sum());
    // Ties within rounding count as hits, so that a split equal to the observed one (or its
    // mirror) is never missed by a last-bit difference in the sums.
    let at_least = |d: f64| d >= observed - 1e-9 * observed.abs().max(1.0);
    let splits = binomial(n as u64, na as u64);
    if n < 64 && splits.is_some_and(|c| c <= PERMUTATION_EXACT_MAX) {
        let (mut hits, mut count) = (0u64, 0u64);
        // Every n-bit mask with n_a bits set (Gosper's hack), in increasing order.
        let mut mask: u64 = (1u64 << na) - 1;
        while mask < (1u64 << n) {
            let s: f64 = (0..n)
                .filter(|i| mask >> i & 1 == 1)
                .map(|i| pooled[i])
                .sum();
            count += 1;
            hits += u64::from(at_least(diff(s)));
            let c = mask & mask.wrapping_neg();
            let r = mask + c;
            mask = (((r ^ mask) >> 2) / c) | r;
        }
        return Some(hits as f64 / count as f64);
    }
    let mut rng = SplitMix64(seed);
    let mut v = pooled;
    let mut hits = 0usize;
    for _ in 0..PERMUTATION_DRAWS {
        // The first n_a places of a partial Fisher-Yates shuffle are a uniform group.
        for i in 0..na {
            let j = i + rng.below(n - i);
            v.swap(i, j);
        }
        let s: f64 = v[..na].iter().sum();
        hits += usize::from(at_least(diff(s)));
    }
    Some((1 + hits) as f64 / (1 + PERMUTATION_DRAWS) as f64)
}

/// `C(n, k)`, `None` on overflow.
fn binomial(n: u64, k: u64) -> Option<u64> {
    let k = k.min(n.saturating_sub(k));
    let mut c: u64 = 1;
    for i in 0..k {
        c = c.checked_mul(n - i)? / (i + 1);
    }
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The exact test by hand: A = {1, 2}, B = {3, 4}: of the C(4,2) = 6 splits, {1,2}|{3,4}
    // and its mirror have the largest difference (2): p = 2/6. Equal samples: every split is
    // at least as far apart as the observed 0: p = 1. Four constant layouts a side that differ:
    // p = 2/70, the smallest possible.
    #[test]
    fn permutation_exact_by_hand() {
        let p = permutation_p(&[1.0, 2.0], &[3.0, 4.0], 1).unwrap();
        assert!((p - 2.0 / 6.0).abs() < 1e-12, "{p}");
        assert_eq!(permutation_p(&[5.0, 5.0], &[5.0, 5.0], 1), Some(1.0));
        let p = permutation_p(&[7.0; 4], &[9.0; 4], 1).unwrap();
        assert!((p - 2.0 / 70.0).abs() < 1e-12, "{p}");
        // Interleaved values: no evidence at all.
        let p = permutation_p(&[1.0, 4.0, 5.0, 8.0], &[2.0, 3.0, 6.0, 7.0], 1).unwrap();
        assert!(p > 0.5, "{p}");
        assert_eq!(permutation_p(&[], &[1.0], 1), None);
        assert_eq!(binomial(20, 10), Some(184_756));
    }

    // Above the exact limit (C(24,12) = 2.7 million splits) the draws are seeded: the same
    // seed gives the same p, and a clear separation stays below 1/1000.
    #[test]
    fn permutation_drawn_is_seeded() {
        let a: Vec<f64> = (0..12).map(|i| 100.0 + f64::from(i)).collect();
        let b: Vec<f64> = (0..12).map(|i| 200.0 + f64::from(i)).collect();
        let p = permutation_p(&a, &b, 3).unwrap();
        assert_eq!(Some(p), permutation_p(&a, &b, 3));
        assert!(p < 0.001, "{p}");
        let p = permutation_p(&a, &a, 3).unwrap();
        assert!(p > 0.99, "{p}");
    }

    fn close(got: f64, want: f64, tol: f64) {
        assert!(
            (got - want).abs() <= tol,
            "got {got}, want {want} (tol {tol})"
        );
    }

    // The two samples of Wikipedia's "Welch's t-test" example 1.
    const A1: [f64; 15] = [
        27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4,
    ];
    const A2: [f64; 15] = [
        27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4,
    ];

    // Location and spread by hand: median of odd/even counts, Bessel-corrected sd.
    #[test]
    fn location_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        // Deviations -2, -1, 3: squares 14, divided by n - 1 = 2.
        assert_eq!(sample_variance(&[1.0, 2.0, 6.0]), Some(7.0));
        assert_eq!(sample_sd(&[5.0]), None);
        close(sample_sd(&A1).unwrap(), 2.804_893_682_731_767, 1e-12);
        close(sample_sd(&A2).unwrap(), 1.952_605_097_470_215, 1e-12);
    }

    // Wikipedia's Welch example: t = 2.46, df = 24.99, p = 0.021 (the p-value below was
    // computed independently by numerically integrating the t density).
    #[test]
    fn welch_matches_wikipedia_example() {
        let w = welch(&A1, &A2).unwrap();
        close(w.t, 2.455_356_398_286_01, 1e-10);
        close(w.df, 24.988_529_290_231_42, 1e-9);
        close(w.p, 0.021_378_001_462_863, 1e-8);
        // Swapping the sides flips the sign only.
        let s = welch(&A2, &A1).unwrap();
        close(s.t, -w.t, 1e-12);
        close(s.p, w.p, 1e-14);
    }

    // Cohen's d of the same example: mean difference over pooled sd.
    #[test]
    fn sigmas_of_example() {
        close(sigmas(&A1, &A2).unwrap(), 0.896_569_390_703_924_5, 1e-12);
        assert_eq!(sigmas(&[1.0, 1.0], &[2.0, 2.0]), None);
    }

    // The t CDF against closed forms: Cauchy for df = 1, t / (2 sqrt(2 + t²)) for df = 2.
    #[test]
    fn t_cdf_closed_forms() {
        for t in [-30.0, -3.0, -0.5, 0.0, 0.7, 2.0, 12.0, 100.0] {
            let cauchy = 0.5 + f64::atan(t) / std::f64::consts::PI;
            close(student_t_cdf(t, 1.0), cauchy, 1e-13);
            let df2 = 0.5 + t / (2.0 * (2.0 + t * t).sqrt());
            close(student_t_cdf(t, 2.0), df2, 1e-13);
        }
    }

    // Textbook table values of the 97.5% t quantile.
    #[test]
    fn t_quantiles_from_tables() {
        close(student_t_quantile(0.975, 1.0), 12.706_204_736_174_7, 1e-9);
        close(student_t_quantile(0.975, 5.0), 2.570_581_835_636_3, 1e-9);
        close(student_t_quantile(0.975, 10.0), 2.228_138_851_986_3, 1e-9);
        close(student_t_quantile(0.975, 30.0), 2.042_272_456_301_2, 1e-9);
        close(student_t_quantile(0.975, 1e6), 1.959_966_4, 1e-5);
        close(student_t_quantile(0.5, 7.0), 0.0, 1e-12);
        assert!(student_t_quantile(1.0, 3.0).is_nan());
    }

    // ln Γ at integers and one half: ln((n-1)!) and ln(sqrt(π)).
    #[test]
    fn ln_gamma_known_values() {
        use statrs::function::gamma::ln_gamma;
        close(ln_gamma(1.0), 0.0, 1e-14);
        close(ln_gamma(5.0), 24f64.ln(), 1e-13);
        close(ln_gamma(0.5), std::f64::consts::PI.sqrt().ln(), 1e-13);
        close(ln_gamma(101.0), 363.739_375_555_563_47, 1e-9);
    }

    // I_x(a, 1) = x^a and I_x(1, b) = 1 - (1-x)^b, on both branches of the continued fraction.
    #[test]
    fn incomplete_beta_closed_forms() {
        use statrs::function::beta::beta_reg as incomplete_beta;
        for x in [0.01, 0.2, 0.5, 0.8, 0.99] {
            close(incomplete_beta(3.0, 1.0, x), x * x * x, 1e-13);
            close(incomplete_beta(1.0, 4.0, x), 1.0 - (1.0 - x).powi(4), 1e-13);
        }
        assert_eq!(incomplete_beta(2.0, 2.0, 0.0), 0.0);
        assert_eq!(incomplete_beta(2.0, 2.0, 1.0), 1.0);
    }

    // The log-ratio delta-method interval of the example, values from an independent script.
    #[test]
    fn ratio_ci_of_example() {
        let c = ratio_ci(&A1, &A2).unwrap();
        close(c.ratio, 1.104_066_602_625_680_7, 1e-12);
        close(c.low, 1.014_153_806_956_325_8, 1e-6);
        close(c.high, 1.201_950_882_274_710_7, 1e-6);
        assert_eq!(ratio_ci(&[0.0, 0.0], &[1.0, 2.0]), None);
    }

    // Log-ratios 0.1, 0.2, 0.3: mean 0.2, sd 0.1, n = 3, t(0.975, 2) = 4.302652729911275; the
    // statistic 0.2 / (0.1 / sqrt 3) = sqrt 12, whose df = 2 p-value is 1 - t / sqrt(2 + t²).
    #[test]
    fn paired_ratio_of_example() {
        let a = [1.0, 2.0, 4.0];
        let b: Vec<f64> = a
            .iter()
            .zip([0.1f64, 0.2, 0.3])
            .map(|(x, d)| x * d.exp())
            .collect();
        let p = paired_ratio(&a, &b).unwrap();
        let half = 4.302_652_729_911_275 * 0.1 / 3f64.sqrt();
        close(p.ratio.ratio, 0.2f64.exp(), 1e-12);
        close(p.ratio.low, (0.2 - half).exp(), 1e-6);
        close(p.ratio.high, (0.2 + half).exp(), 1e-6);
        close(p.p.unwrap(), 1.0 - 12f64.sqrt() / 14f64.sqrt(), 1e-9);
        assert_eq!(paired_ratio(&a, &b[..2]), None);
        assert_eq!(paired_ratio(&[1.0, 0.0], &[1.0, 1.0]), None);
    }

    // B 5% slower than A in every pair while the machine's speed drifts threefold: the
    // pairs see exactly 1.05, the unpaired interval cannot tell B from A.
    #[test]
    fn pairing_cancels_drift() {
        let a = [1.0, 3.0, 2.0, 5.0, 1.5, 4.0];
        let b: Vec<f64> = a.iter().map(|x| x * 1.05).collect();
        let p = paired_ratio(&a, &b).unwrap();
        close(p.ratio.low, 1.05, 1e-12);
        close(p.ratio.high, 1.05, 1e-12);
        assert_eq!(p.p, None);
        let c = ratio_ci(&a, &b).unwrap();
        assert!(c.low < 1.0 && c.high > 1.05, "{c:?}");
    }

    // Same seed, same interval; another seed, another interval; both bracket the point value.
    #[test]
    fn bootstrap_is_seeded() {
        let one = bootstrap_median_ratio(&A1, &A2, 42).unwrap();
        assert_eq!(one, bootstrap_median_ratio(&A1, &A2, 42).unwrap());
        let other = bootstrap_median_ratio(&A1, &A2, 43).unwrap();
        assert_ne!((one.low, one.high), (other.low, other.high));
        // Medians 21.0 and 22.9.
        close(one.ratio, 22.9 / 21.0, 1e-15);
        assert!(one.low <= one.ratio && one.ratio <= one.high, "{one:?}");
        assert_eq!(bootstrap_median_ratio(&[], &A2, 1), None);
    }

    // A clear 4x difference gives an interval far above 1 on both methods.
    #[test]
    fn fourfold_difference_is_detected() {
        let a = [1.0, 1.1, 0.9, 1.05, 0.95];
        let b = [4.0, 4.2, 3.9, 4.1, 3.8];
        let c = ratio_ci(&a, &b).unwrap();
        assert!(c.low > 3.5 && c.high < 4.5, "{c:?}");
        let w = welch(&a, &b).unwrap();
        assert!(w.p < 1e-6, "{w:?}");
    }
}
