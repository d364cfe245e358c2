//! [`handler_fn`]: an async closure as a handler service.

use std::future::Future;
use std::task::{Context, Poll};

use super::{HandlerContext, HandlerError};

/// A handler made from an async function; see [`handler_fn`].
#[derive(Clone)]
pub struct HandlerFn<F> {
    f: F,
}

/// Wraps `f` — `async fn(HandlerContext) -> Result<(), HandlerError>` — as a
/// [`tower::Service`]. It must be `Clone` (the worker clones the stack per delivery), which
/// a closure capturing `Arc`s is.
pub fn handler_fn<F, Fut>(f: F) -> HandlerFn<F>
where
    F: Fn(HandlerContext) -> Fut + Clone,
    Fut: Future<Output = Result<(), HandlerError>>,
{
    HandlerFn { f }
}

impl<F, Fut> tower::Service<HandlerContext> for HandlerFn<F>
where
    F: Fn(HandlerContext) -> Fut,
    Fut: Future<Output = Result<(), HandlerError>>,
{
    type Response = ();
    type Error = HandlerError;
    type Future = Fut;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), HandlerError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, ctx: HandlerContext) -> Fut {
        (self.f)(ctx)
    }
}

/// The future the middleware's services return: boxed, so a stack's type stays readable.
pub type HandlerFuture =
    std::pin::Pin<Box<dyn Future<Output = Result<(), HandlerError>> + Send + 'static>>;
