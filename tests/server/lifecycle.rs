//! `server::start` from serve flags (mapped to its config): both listeners, and the apiserver's termination sequence.

use super::*;

fn loopback_config(extra: &[&str]) -> kube_apf_proxy::server::ServerConfig {
    let mut args = vec![
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        "--admin-address=127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    kube_apf_proxy::cli::ServeOptions::try_parse_from(args)
        .expect("flags")
        .server_config()
}

async fn admin_status(addr: std::net::SocketAddr, path: &str) -> StatusCode {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let io = hyper_util::rt::TokioIo::new(tcp);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let request = Request::get(path)
        .header("host", "localhost")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("request");
    sender
        .send_request(request)
        .await
        .expect("response")
        .status()
}

#[tokio::test(start_paused = true)]
async fn termination_fails_readyz_serves_through_the_delay_then_stops() {
    let config = loopback_config(&["--shutdown-delay-duration=10s"]);
    let parts = kube_apf_proxy::server::ServeParts::new(echo_handler());
    let running = kube_apf_proxy::server::start(config, parts)
        .await
        .expect("start");
    let (secure, admin) = (running.secure_addr(), running.admin_addr());
    let trust = running.tls().self_signed_cert.clone().expect("self-signed");
    assert_eq!(admin_status(admin, "/readyz").await, StatusCode::OK);

    running.terminate();
    tokio::task::yield_now().await;
    let terminated = tokio::time::Instant::now();
    assert_eq!(
        admin_status(admin, "/readyz").await,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(admin_status(admin, "/livez").await, StatusCode::OK);
    // Still serving during the delay.
    tokio::time::sleep(Duration::from_secs(9)).await;
    let stream = connect(secure, &trust, ClientOptions::default())
        .await
        .expect("handshake during the delay");
    assert_eq!(get(stream, "/").await.expect("response").1, StatusCode::OK);

    tokio::time::timeout(PROMPTLY * 10, running.wait())
        .await
        .expect("stops after the delay");
    assert_eq!(terminated.elapsed().as_secs(), 10);
    assert!(tokio::net::TcpStream::connect(secure).await.is_err());
    assert!(tokio::net::TcpStream::connect(admin).await.is_err());
}
