//! TCP_INFO: the kernel's smoothed RTT of a connection (IANS' per-connection SRTT).

use std::os::fd::RawFd;

/// Smoothed RTT of the TCP socket `fd` in ms, or `None` if the kernel has no sample yet
/// or the call fails (e.g. not a TCP socket).
pub fn srtt_ms(fd: RawFd) -> Option<f64> {
    // SAFETY: tcp_info is plain old data; getsockopt writes at most `len` bytes into it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 || info.tcpi_rtt == 0 {
        return None;
    }
    Some(f64::from(info.tcpi_rtt) / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn loopback_connection_has_an_srtt() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _s = l.accept().unwrap();
        let rtt = srtt_ms(c.as_raw_fd()).expect("srtt after handshake");
        assert!(rtt > 0.0 && rtt < 1000.0, "{rtt}");
        assert_eq!(srtt_ms(-1), None);
    }
}
