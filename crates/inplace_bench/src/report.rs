//! Figures and targets, printed as they come and as a table at the end.

#[derive(Default)]
pub struct Report {
    rows: Vec<(String, String, String)>,
    failed: usize,
}

impl Report {
    pub fn figure(&mut self, what: &str, value: String) {
        println!("{what}: {value}");
        self.rows.push((what.into(), value, String::new()));
    }

    pub fn target(&mut self, what: &str, value: String, target: &str, pass: bool) {
        let verdict = format!("{target}: {}", if pass { "PASS" } else { "FAIL" });
        println!("{what}: {value}   [{verdict}]");
        self.failed += usize::from(!pass);
        self.rows.push((what.into(), value, verdict));
    }

    pub fn print_summary(&self) {
        println!("\n== summary ==");
        for (what, value, verdict) in &self.rows {
            println!("{what:<64} {value}  {verdict}");
        }
        println!(
            "{} targets, {} failed",
            self.rows.iter().filter(|r| !r.2.is_empty()).count(),
            self.failed
        );
    }
}

pub fn ms(d: std::time::Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

pub fn per_sec(n: usize, d: std::time::Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}
