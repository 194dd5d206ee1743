//! Flags (and config keys) of the background work that `serve` and
//! `telestore-lab sustained` (tools/lab, through `#[path]`) share: compaction splitting and encoding, I/O
//! priority, the background write limiter and the slowdown and stop
//! driven by sorted runs and compaction debt.

use anyhow::Result;
use clap::Args;
use telestore::io::priority::IoPriority;
use telestore::Options;

#[derive(Args, Debug, Default, Clone)]
pub struct BackgroundArgs {
    /// Most parts a compaction of one region is split into by key range,
    /// merged on threads of their own (subcompactions), 1..=16; 1 never
    /// splits [default: one per two cores, at most 4].
    #[arg(long, value_name = "N")]
    pub subcompactions: Option<usize>,
    /// I/O priority of the flush and compaction threads: normal, low
    /// (best-effort, lowest level) or idle (only when the disk is
    /// otherwise idle; can starve compactions under a saturating load).
    /// Honoured by the mq-deadline and bfq schedulers [default: low].
    #[arg(long, value_name = "CLASS")]
    pub background_io_priority: Option<String>,
    /// Ceiling of flush and compaction writes in MiB/s; compactions wait
    /// for it, flushes never do; 0 for no limit [default: 0].
    #[arg(long, value_name = "MIB")]
    pub background_write_mib_s: Option<u64>,
    /// Tune the limiter from the compaction debt: a tenth of the ceiling
    /// with no debt, all of it from the slowdown threshold [default: true].
    #[arg(long, value_name = "BOOL")]
    pub background_write_auto: Option<bool>,
    /// Compaction debt (all regions) from which each write batch is
    /// delayed 1 to 50 ms; 0 never [default: 8192].
    #[arg(long, value_name = "MIB")]
    pub compaction_debt_slowdown_mib: Option<u64>,
    /// Compaction debt from which writes stall (then Busy after the stall
    /// limit); 0 never [default: 32768].
    #[arg(long, value_name = "MIB")]
    pub compaction_debt_stop_mib: Option<u64>,
    /// Sorted runs in a region from which each write batch is delayed 1
    /// to 50 ms (rising to the file limit, 16); 0 never [default: 10].
    #[arg(long, value_name = "N")]
    pub slowdown_file_count: Option<usize>,
    /// A minor compaction reading less than this writes rows blocks
    /// (cheaper to encode) whatever the table's encoding; larger ones and
    /// majors write the table's encoding; 0: always the table's
    /// [default: 0].
    #[arg(long, value_name = "MIB")]
    pub columnar_min_compaction_mib: Option<u64>,
}

impl BackgroundArgs {
    /// Each setting from `self`, else from `other` (flags over a file).
    pub fn or(self, other: BackgroundArgs) -> Self {
        BackgroundArgs {
            subcompactions: self.subcompactions.or(other.subcompactions),
            background_io_priority: self.background_io_priority.or(other.background_io_priority),
            background_write_mib_s: self.background_write_mib_s.or(other.background_write_mib_s),
            background_write_auto: self.background_write_auto.or(other.background_write_auto),
            compaction_debt_slowdown_mib: self
                .compaction_debt_slowdown_mib
                .or(other.compaction_debt_slowdown_mib),
            compaction_debt_stop_mib: self
                .compaction_debt_stop_mib
                .or(other.compaction_debt_stop_mib),
            slowdown_file_count: self.slowdown_file_count.or(other.slowdown_file_count),
            columnar_min_compaction_mib: self
                .columnar_min_compaction_mib
                .or(other.columnar_min_compaction_mib),
        }
    }

    /// Set what was given on `opts` (checked later by `Options::validate`).
    pub fn apply(&self, opts: &mut Options) -> Result<()> {
        let mib = |m: u64| m.saturating_mul(1 << 20);
        if let Some(n) = self.subcompactions {
            opts.subcompactions = n;
        }
        if let Some(p) = &self.background_io_priority {
            opts.background_io_priority = IoPriority::parse(p)?;
        }
        if let Some(m) = self.background_write_mib_s {
            opts.background_write_bytes_per_sec = mib(m);
        }
        if let Some(a) = self.background_write_auto {
            opts.background_write_auto = a;
        }
        if let Some(m) = self.compaction_debt_slowdown_mib {
            opts.compaction_debt_slowdown_bytes = mib(m);
        }
        if let Some(m) = self.compaction_debt_stop_mib {
            opts.compaction_debt_stop_bytes = mib(m);
        }
        if let Some(n) = self.slowdown_file_count {
            opts.slowdown_file_count = n;
        }
        if let Some(m) = self.columnar_min_compaction_mib {
            opts.columnar_min_compaction_bytes = mib(m);
        }
        Ok(())
    }
}
