//! `ragctx bench`: search and turn benchmarks that print numbers.

use crate::config::Settings;
use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand)]
pub enum BenchCommand {}

pub fn run(_settings: Settings, what: &BenchCommand) -> Result<()> {
    match *what {}
}
