// AWS Signature Version 4 as libcurl computes it (CURLOPT_AWS_SIGV4, which reader/src/remote/
// http.cc uses to sign S3 requests), compared with AWS's published test vector "get-vanilla"
// (the aws-sig-v4-test-suite of AWS's "Signature Version 4 signing process" documentation).
// s3rver, the S3 server of the other tests, does not verify signatures, so this is the check
// against a value nobody here computed. The request goes to a one-shot listener on 127.0.0.1
// (CURLOPT_CONNECT_TO maps the vector's host there); nothing leaves this machine.
#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

namespace {

// Accepts one connection on 127.0.0.1, records the request head, answers 200 with no body.
class OneShotListener {
 public:
  OneShotListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, 1) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~OneShotListener() {
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }
  // The request head (valid after the request finished).
  const std::string& head() const { return head_; }

 private:
  void Serve() {
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    char buf[4096];
    while (head_.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = ::read(c, buf, sizeof(buf));
      if (n <= 0) break;
      head_.append(buf, static_cast<size_t>(n));
    }
    const std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    (void)!::write(c, reply.data(), reply.size());
    ::close(c);
  }
  int fd_ = -1;
  int port_ = 0;
  std::string head_;
  std::thread thread_;
};

// The value of header `name` (case-insensitive) in a request head, or "".
std::string Header(const std::string& head, const std::string& name) {
  std::string lower = head;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const size_t at = lower.find("\r\n" + name + ":");
  if (at == std::string::npos) return "";
  size_t begin = at + 3 + name.size();
  while (begin < head.size() && head[begin] == ' ') ++begin;
  return head.substr(begin, head.find("\r\n", begin) - begin);
}

TEST(SigV4, LibcurlSignsAwsGetVanillaTestVector) {
  OneShotListener listener;
  ASSERT_GT(listener.port(), 0);
  CURL* curl = curl_easy_init();
  ASSERT_NE(curl, nullptr);
  const std::string connect_to =
      "example.amazonaws.com:80:127.0.0.1:" + std::to_string(listener.port());
  curl_slist* connect = curl_slist_append(nullptr, connect_to.c_str());
  curl_slist* headers = curl_slist_append(nullptr, "X-Amz-Date: 20150830T123600Z");
  curl_easy_setopt(curl, CURLOPT_URL, "http://example.amazonaws.com/");
  curl_easy_setopt(curl, CURLOPT_CONNECT_TO, connect);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, "aws:amz:us-east-1:service");
  curl_easy_setopt(curl, CURLOPT_USERPWD, "AKIDEXAMPLE:wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  const CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  curl_slist_free_all(connect);
  curl_easy_cleanup(curl);
  ASSERT_EQ(rc, CURLE_OK) << curl_easy_strerror(rc);
  // get-vanilla.authz of AWS's test suite.
  EXPECT_EQ(Header(listener.head(), "authorization"),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
      << listener.head();
}

}  // namespace
