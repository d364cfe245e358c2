//! A panicking handler becomes a transient failure carrying the panic message, so the
//! delivery is nacked at once with that text as its last error (instead of being dropped
//! and waiting out its lease) and the worker goes on.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower::{Layer, Service, ServiceExt};

use super::{HandlerContext, HandlerError, HandlerFuture};

#[derive(Debug, Clone, Copy, Default)]
pub struct CatchPanicLayer;

impl<S> Layer<S> for CatchPanicLayer {
    type Service = CatchPanic<S>;
    fn layer(&self, inner: S) -> CatchPanic<S> {
        CatchPanic { inner }
    }
}

/// See [`CatchPanicLayer`].
#[derive(Debug, Clone)]
pub struct CatchPanic<S> {
    inner: S,
}

impl<S> Service<HandlerContext> for CatchPanic<S>
where
    S: Service<HandlerContext, Response = (), Error = HandlerError> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = ();
    type Error = HandlerError;
    type Future = HandlerFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), HandlerError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, ctx: HandlerContext) -> HandlerFuture {
        let inner = self.inner.clone();
        // The call itself may panic too (a handler that panics before its first await), so
        // it happens inside the guarded future.
        Box::pin(Unwinding {
            future: Box::pin(async move { inner.oneshot(ctx).await }),
        })
    }
}

/// Polls `future`, turning a panic during a poll into a transient failure.
///
/// Unwind safety: after a panic the future is never polled again (it is finished), and the
/// handler's shared state is the handler's to keep consistent, as with any panic that a
/// thread pool survives.
struct Unwinding {
    future: HandlerFuture,
}

impl Future for Unwinding {
    type Output = Result<(), HandlerError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = &mut self.future;
        match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => {
                let text = panic_text(&*panic);
                tracing::error!(panic = %text, "the handler panicked");
                Poll::Ready(Err(HandlerError::transient(format!(
                    "the handler panicked: {text}"
                ))))
            }
        }
    }
}

/// The message a panic was raised with (`panic!("...")` gives a `&str` or a `String`).
pub fn panic_text(panic: &(dyn Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "(a panic without a message)".to_owned()
    }
}
