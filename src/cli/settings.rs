//! The flags generated from the daemon's settings
//! (`telestore::settings::SETTINGS`): one `--key-name VALUE` per setting,
//! with its environment variable, help and default taken from the one
//! declaration. `serve` takes them all; `telestore-lab sustained` (which
//! includes this file by `#[path]`) takes the background group.

use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use telestore::settings::{Group, Override, Setting, SETTINGS};

/// The settings given as flags or environment variables, in declaration
/// order; `BACKGROUND_ONLY` keeps the flags to [`Group::Background`].
#[derive(Debug, Default, Clone)]
pub struct SettingFlags<const BACKGROUND_ONLY: bool> {
    /// What was given, ready for `DaemonConfig::load`.
    pub given: Vec<Override>,
}

fn selected<const BACKGROUND_ONLY: bool>() -> impl Iterator<Item = &'static Setting> {
    SETTINGS.iter().filter(|s| match s.group {
        Group::Table => false,
        Group::Background => true,
        _ => !BACKGROUND_ONLY,
    })
}

/// The flag of `s`: help from its documentation, its range and default.
fn arg_of(s: &'static Setting) -> Arg {
    let text = s.text();
    let short = text.split("\n\n").next().unwrap_or_default().to_string();
    let mut long = text.clone();
    if let Some((lo, hi)) = s.range {
        long.push_str(&format!(" Range {lo}..={hi}."));
    }
    let default = format!(" [default: {}]", s.default_text());
    Arg::new(s.key)
        .long(s.key.replace('_', "-"))
        .env(s.env())
        .hide_env_values(true)
        .value_name(s.value_name)
        .help(short + &default)
        .long_help(long + &default)
        .hide_short_help(s.group != Group::Top)
        .num_args(1)
}

impl<const B: bool> Args for SettingFlags<B> {
    fn augment_args(cmd: Command) -> Command {
        cmd.args(selected::<B>().map(arg_of))
    }
    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<const B: bool> FromArgMatches for SettingFlags<B> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given = Vec::new();
        for s in selected::<B>() {
            let Some(value) = m.get_one::<String>(s.key) else {
                continue;
            };
            let source = match m.value_source(s.key) {
                Some(ValueSource::EnvVariable) => format!("${}", s.env()),
                _ => s.flag(),
            };
            given.push(Override {
                key: s.key.to_string(),
                value: value.clone(),
                source,
            });
        }
        Ok(SettingFlags { given })
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}
