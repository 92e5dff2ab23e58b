//! `simulate`: replay a recorded workload through flow control in virtual time.

pub mod trace;
