//! An error and its causes as one line, each cause once.
//!
//! Many errors put their source's message into their own (`"reading {path}: {source}"`) and also
//! return it from `source()`; printing the chain naively (anyhow's `{:#}`) then repeats it. Some
//! do the opposite (hyper-util's `tcp connect error` keeps `Connection refused` for `source()`),
//! and printing only the top loses the reason. [`render`] prints the top and adds each cause whose
//! message is not already in what was printed. A leaf: it imports nothing of the crate.

use std::error::Error;

/// `error: cause: cause`, each message once: a cause already contained in the line is skipped.
pub fn render(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        append(&mut line, &cause.to_string());
        source = cause.source();
    }
    line
}

/// [`render`] for the causes an [`anyhow::Error`] carries (its context layers included).
pub fn render_anyhow(error: &anyhow::Error) -> String {
    let mut chain = error.chain();
    let mut line = chain.next().map(ToString::to_string).unwrap_or_default();
    for cause in chain {
        append(&mut line, &cause.to_string());
    }
    line
}

/// The first cause in the chain (the error itself included) of type `T`.
pub fn find<'a, T: Error + 'static>(error: &'a (dyn Error + 'static)) -> Option<&'a T> {
    let mut source = Some(error);
    while let Some(cause) = source {
        if let Some(found) = cause.downcast_ref::<T>() {
            return Some(found);
        }
        source = cause.source();
    }
    None
}

fn append(line: &mut String, message: &str) {
    if !message.is_empty() && !line.contains(message) {
        line.push_str(": ");
        line.push_str(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading x: {0}")]
    struct Repeats(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("tcp connect error")]
    struct Hides(#[source] std::io::Error);

    fn refused() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::ConnectionRefused)
    }

    #[test]
    fn a_cause_already_in_the_message_is_printed_once() {
        assert_eq!(render(&Repeats(refused())), "reading x: connection refused");
    }

    #[test]
    fn a_cause_the_message_leaves_out_is_added() {
        assert_eq!(
            render(&Hides(refused())),
            "tcp connect error: connection refused"
        );
    }

    #[test]
    fn anyhow_context_layers_are_printed_once_each() {
        let error = anyhow::Error::new(Repeats(refused())).context("upstream");
        assert_eq!(
            render_anyhow(&error),
            "upstream: reading x: connection refused"
        );
        let nested =
            anyhow::Error::new(Repeats(refused())).context("reading x: connection refused");
        assert_eq!(render_anyhow(&nested), "reading x: connection refused");
    }

    #[test]
    fn find_reaches_through_the_chain() {
        let error = Hides(refused());
        let io = find::<std::io::Error>(&error).expect("found");
        assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused);
    }
}
