//! The planner's peak contract on one model (docs/planner.md, "The peak
//! contract").
//!
//! ```text
//! cargo run --release --example peak -- [small|medium|deep|deep-narrow|llama|unet|mixed]
//! ```
//!
//! For nine kept budgets and nine peak budgets from the least any plan
//! needs to what the model keeps with no checkpoint, plans the model, runs
//! one step under each plan and prints the predicted peak during backward
//! against glibc's heap at every node boundary of that backward
//! (`diagnostics::backward_heap_peak`), a measure independent of remat's
//! records.

use remat_reference::model::{Config, DEEP, MEDIUM, SMALL};
use remat_reference::peak_contract::{sweep, table};
use remat_reference::planned::{
    mixed::Mixed,
    transformer::{Llama, LLAMA},
    unet::UNet,
    Planned, Reference,
};

/// The reference model at the deep config's depth and the small width: what
/// the tests sweep for depth.
const NARROW_DEEP: Config = Config { l: 32, ..SMALL };

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tch::set_num_threads(1);
    let name = std::env::args().nth(1).unwrap_or_else(|| "small".into());
    let model: Box<dyn Planned> = match name.as_str() {
        "small" => Box::new(Reference::new("small", SMALL)),
        "medium" => Box::new(Reference::new("medium", MEDIUM)),
        "deep" => Box::new(Reference::new("deep", DEEP)),
        "deep-narrow" => Box::new(Reference::new("deep-narrow", NARROW_DEEP)),
        "llama" => Box::new(Llama::new(LLAMA)),
        "unet" => Box::new(UNet::new()),
        "mixed" => Box::new(Mixed::new()),
        other => return Err(format!("unknown model `{other}`").into()),
    };
    let sweep =
        sweep(model.as_ref(), 8)?.ok_or("the C heap does not report its bytes here (not glibc)")?;
    print!("{}", table(&sweep.rows));
    Ok(())
}
