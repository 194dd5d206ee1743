//! `telestore top`: a running daemon's status in the terminal, refreshed
//! every second (the drawing is `telestore::top`).

use anyhow::Result;
use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyModifiers};
use std::time::{Duration, Instant};
use telestore::top;

#[derive(Args, Debug)]
pub struct TopArgs {
    /// The daemon's HTTP address.
    #[arg(
        long,
        default_value = "http://127.0.0.1:7071",
        env = "TELESTORE_SERVER"
    )]
    pub server: String,
    /// Token, when the daemon requires one (a read-only token is enough).
    #[arg(long, env = "TELESTORE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Seconds to wait for the daemon's answer (a daemon under heavy load
    /// answers slowly); on a timeout the last screen stays, with the error.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Print one screen as text and exit (for scripts and logs), WIDTH x
    /// HEIGHT characters, e.g. 120x40.
    #[arg(long, value_name = "WIDTHxHEIGHT")]
    pub once: Option<String>,
}

pub fn run(a: TopArgs) -> Result<()> {
    anyhow::ensure!(
        a.interval.is_finite() && a.interval >= 0.1,
        "--interval must be at least 0.1 s"
    );
    anyhow::ensure!(
        a.timeout.is_finite() && a.timeout >= 0.1,
        "--timeout must be at least 0.1 s"
    );
    let token = a.token.as_deref();
    let timeout = Duration::from_secs_f64(a.timeout);
    if let Some(size) = &a.once {
        let (w, h) = parse_size(size)?;
        let s = top::fetch(&a.server, token, timeout).map_err(anyhow::Error::msg)?;
        print!("{}", top::render_text(&s, &a.server, w, h));
        return Ok(());
    }
    // Fail before taking over the terminal when the daemon is not there.
    let mut last = top::fetch(&a.server, token, timeout).map_err(anyhow::Error::msg)?;
    let mut terminal = ratatui::init();
    let every = Duration::from_secs_f64(a.interval);
    let result = (|| -> Result<()> {
        loop {
            let error = match top::fetch(&a.server, token, timeout) {
                Ok(s) => {
                    last = s;
                    None
                }
                Err(e) => Some(e),
            };
            terminal.draw(|f| top::draw(f, &last, &a.server, error.as_deref()))?;
            let next = Instant::now() + every;
            while let Some(left) = next.checked_duration_since(Instant::now()) {
                if event::poll(left)? {
                    if let Event::Key(k) = event::read()? {
                        let ctrl_c = k.code == KeyCode::Char('c')
                            && k.modifiers.contains(KeyModifiers::CONTROL);
                        if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                            return Ok(());
                        }
                    }
                }
            }
        }
    })();
    ratatui::restore();
    result
}

fn parse_size(s: &str) -> Result<(u16, u16)> {
    let bad = || anyhow::anyhow!("--once wants WIDTHxHEIGHT, e.g. 120x40 (got {s:?})");
    let (w, h) = s.split_once('x').ok_or_else(bad)?;
    let (w, h): (u16, u16) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
    anyhow::ensure!((40..=1000).contains(&w) && (10..=1000).contains(&h), bad());
    Ok((w, h))
}
