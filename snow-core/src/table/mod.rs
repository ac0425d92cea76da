//! The ServiceNow Table API: encoded queries ([`query`]), pages of raw rows ([`page`]) and the
//! client that sends list and write requests and turns error answers into typed errors ([`client`]),
//! and a table's dictionary ([`dictionary`]).

pub mod client;
pub mod dictionary;
pub mod page;
pub mod query;

pub use client::{DisplayValue, Download, ListParams, ListResponse, TableClient, WriteResponse};
pub use page::{PageRow, parse_page};
pub use query::{BaseQuery, Op, Term};
