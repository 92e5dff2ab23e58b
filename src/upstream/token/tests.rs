use super::*;

#[tokio::test(start_paused = true)]
async fn token_file_is_reread_after_the_refresh_period_and_kept_when_unreadable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("token");
    std::fs::write(&path, "first\n").expect("write");
    let source = TokenSource::new(Credential::TokenFile(path.clone()));
    assert_eq!(
        source.current().await.ok().flatten().as_deref(),
        Some("first")
    );

    std::fs::write(&path, "second").expect("write");
    tokio::time::advance(TOKEN_FILE_REFRESH - Duration::from_secs(1)).await;
    assert_eq!(
        source.current().await.ok().flatten().as_deref(),
        Some("first")
    );

    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(
        source.current().await.ok().flatten().as_deref(),
        Some("second")
    );

    std::fs::remove_file(&path).expect("remove");
    tokio::time::advance(TOKEN_FILE_REFRESH).await;
    assert_eq!(
        source.current().await.ok().flatten().as_deref(),
        Some("second")
    );
}

#[tokio::test]
async fn an_unreadable_or_empty_token_file_without_a_previous_token_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = TokenSource::new(Credential::TokenFile(dir.path().join("missing")));
    assert!(matches!(
        missing.current().await,
        Err(UpstreamError::Unavailable(_))
    ));
    let empty_path = dir.path().join("empty");
    std::fs::write(&empty_path, " \n").expect("write");
    let empty = TokenSource::new(Credential::TokenFile(empty_path));
    assert!(empty.current().await.is_err());
    let fixed = TokenSource::new(Credential::Token("t".into()));
    assert_eq!(fixed.current().await.ok().flatten().as_deref(), Some("t"));
    assert_eq!(
        TokenSource::new(Credential::None)
            .current()
            .await
            .ok()
            .flatten(),
        None
    );
}
