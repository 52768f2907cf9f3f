// Functions `#[checkpoint]` refuses: replay runs later, inside backward,
// so the body cannot borrow mutably from the caller or be async.
use remat::checkpoint;
use tch::Tensor;

struct Counter {
    calls: usize,
}

impl Counter {
    #[checkpoint]
    fn count(&mut self, x: &Tensor) -> Tensor {
        self.calls += 1;
        x.relu()
    }
}

#[checkpoint]
fn accumulate(x: &Tensor, out: &mut Vec<Tensor>) -> Tensor {
    out.push(x.relu());
    x.relu()
}

#[checkpoint]
async fn later(x: &Tensor) -> Tensor {
    x.relu()
}

fn main() {}
