#include "transports/tls_flags.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <filesystem>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "inputs/input_file.h"

ABSL_FLAG(std::string, tls_cert, "",
          "TLS: this process's certificate chain (PEM). PS: turns TLS on (with --tls-key); "
          "worker: a client certificate for a PS that requires one");
ABSL_FLAG(std::string, tls_key, "", "TLS: the private key (PEM) of --tls-cert");
ABSL_FLAG(std::string, tls_ca, "",
          "TLS: CA certificates (PEM). Worker: turns TLS on and verifies the PS against them "
          "(else the system's roots); PS: requires and verifies workers' certificates "
          "(mutual TLS)");
ABSL_FLAG(std::string, tls_server_name, "",
          "TLS, worker: the name the PS certificate must carry when it is not the host "
          "dialled (e.g. the certificate names ps0.cluster, the worker dials an address)");

namespace psbench {
namespace {

// OpenSSL's last error, for messages ("no start line", "key values mismatch").
std::string SslError() {
  unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  if (e == 0) return "no PEM data";
  const char* reason = ERR_reason_error_string(e);
  return reason != nullptr ? reason : absl::StrCat("OpenSSL error ", e);
}

// A certificate chain or key is a few KiB; 1 MiB leaves room for long chains.
constexpr uint64_t kMaxPemBytes = uint64_t{1} << 20;

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  absl::StatusOr<std::string> text =
      ReadInputFile(path, absl::StrCat("--", flag), kMaxPemBytes, /*limit_flag=*/"");
  if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
  return text;
}

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

Bio MemBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
}

// The first certificate of a PEM file, after checking that it has at least one.
absl::StatusOr<X509Ptr> FirstCertificate(const std::string& flag, const std::string& path,
                                         const std::string& pem) {
  Bio bio = MemBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (!cert) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", path,
                                                   ": not a PEM certificate (", SslError(), ")"));
  }
  // Every further certificate (a chain, or several CAs) must parse too.
  while (X509* more = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) X509_free(more);
  unsigned long e = ERR_peek_last_error();
  if (e != 0 && ERR_GET_REASON(e) != PEM_R_NO_START_LINE) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", path, ": a certificate after the first is malformed (", SslError(), ")"));
  }
  ERR_clear_error();
  return cert;
}

// Whether `leaf` (the first certificate of o.cert_pem, the others its chain) verifies against
// the CA certificates of o.ca_pem, as the PS and the workers check each other's: with gRPC's
// flags, so that an intermediate CA given as --tls-ca is trusted as gRPC trusts it.
absl::Status VerifyAgainstCa(const TlsOptions& o, X509* leaf) {
  std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), &X509_STORE_free);
  auto free_chain = [](STACK_OF(X509)* s) { sk_X509_pop_free(s, X509_free); };
  std::unique_ptr<STACK_OF(X509), decltype(free_chain)> chain(sk_X509_new_null(), free_chain);
  std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(), &X509_STORE_CTX_free);
  if (!store || !chain || !ctx) return absl::ResourceExhaustedError("OpenSSL could not set up a certificate check");
  X509_STORE_set_flags(store.get(), X509_V_FLAG_PARTIAL_CHAIN | X509_V_FLAG_TRUSTED_FIRST);
  Bio cas = MemBio(o.ca_pem);
  while (X509* ca = PEM_read_bio_X509(cas.get(), nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store.get(), ca);
    X509_free(ca);
  }
  Bio certs = MemBio(o.cert_pem);
  X509_free(PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr));  // the leaf, held by the caller
  while (X509* c = PEM_read_bio_X509(certs.get(), nullptr, nullptr, nullptr)) {
    if (sk_X509_push(chain.get(), c) == 0) X509_free(c);
  }
  ERR_clear_error();
  if (X509_STORE_CTX_init(ctx.get(), store.get(), leaf, chain.get()) != 1) {
    ERR_clear_error();
    return absl::InternalError("OpenSSL could not set up a certificate check");
  }
  const bool ok = X509_verify_cert(ctx.get()) == 1;
  const int err = X509_STORE_CTX_get_error(ctx.get());
  ERR_clear_error();
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--tls-cert=", o.cert_file, " does not verify against --tls-ca=", o.ca_file, " (",
      X509_verify_cert_error_string(err), "): the PS and the workers each check this certificate against it"));
}

}  // namespace

absl::StatusOr<TlsOptions> TlsOptionsFromFlags(TlsSide side) {
  TlsOptions o;
  o.cert_file = absl::GetFlag(FLAGS_tls_cert);
  o.key_file = absl::GetFlag(FLAGS_tls_key);
  o.ca_file = absl::GetFlag(FLAGS_tls_ca);
  o.server_name = absl::GetFlag(FLAGS_tls_server_name);
  if (o.cert_file.empty() != o.key_file.empty()) {
    return absl::InvalidArgumentError(
        o.cert_file.empty() ? "--tls-key needs --tls-cert: give the certificate and its key together"
                            : "--tls-cert needs --tls-key: give the certificate and its key together");
  }
  if (side == TlsSide::kServer && o.cert_file.empty() && !o.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-ca on psbench-ps verifies the workers' certificates; the PS needs its own "
        "--tls-cert and --tls-key for TLS");
  }
  const bool launcher = side == TlsSide::kLauncher || side == TlsSide::kLocalLauncher;
  if (launcher && o.cert_file.empty() && !o.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-ca needs --tls-cert and --tls-key: psbench run gives them to every PS it starts");
  }
  if (side == TlsSide::kServer && !o.server_name.empty()) {
    return absl::InvalidArgumentError("--tls-server-name is a worker's flag (the name it expects "
                                      "in the PS certificate)");
  }
  if (side == TlsSide::kLocalLauncher && !o.cert_file.empty() && o.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert needs --tls-ca under psbench run: the workers verify the PS's certificate (this one) "
        "against it; give the CA that signed it (a self-signed certificate is its own)");
  }
  if (!o.server_name.empty() && o.cert_file.empty() && o.ca_file.empty()) {
    return absl::InvalidArgumentError("--tls-server-name needs TLS: give --tls-ca");
  }
  ERR_clear_error();
  if (!o.ca_file.empty()) {
    auto pem = ReadPem("tls-ca", o.ca_file);
    if (!pem.ok()) return pem.status();
    o.ca_pem = *std::move(pem);
    if (auto ca = FirstCertificate("tls-ca", o.ca_file, o.ca_pem); !ca.ok()) return ca.status();
  }
  if (!o.cert_file.empty()) {
    auto cert_pem = ReadPem("tls-cert", o.cert_file);
    if (!cert_pem.ok()) return cert_pem.status();
    auto key_pem = ReadPem("tls-key", o.key_file);
    if (!key_pem.ok()) return key_pem.status();
    o.cert_pem = *std::move(cert_pem);
    o.key_pem = *std::move(key_pem);
    auto cert = FirstCertificate("tls-cert", o.cert_file, o.cert_pem);
    if (!cert.ok()) return cert.status();
    Bio bio = MemBio(o.key_pem);
    // No pass phrase callback: OpenSSL's default would prompt on the terminal.
    auto no_pass_phrase = [](char*, int, int, void*) { return 0; };
    KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_pass_phrase, nullptr), &EVP_PKEY_free);
    if (!key) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-key=", o.key_file, ": not an unencrypted PEM private key (", SslError(), ")"));
    }
    if (X509_check_private_key(cert->get(), key.get()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(absl::StrCat("--tls-key=", o.key_file,
                                                     " is not the key of --tls-cert=", o.cert_file));
    }
    // gRPC loads them into an OpenSSL context under the system's security level (an RSA key
    // under 2048 bits fails there): said here, not as a server that cannot start.
    std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_method()), &SSL_CTX_free);
    if (!ctx || SSL_CTX_use_certificate(ctx.get(), cert->get()) != 1 || SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("--tls-cert=", o.cert_file, ", --tls-key=", o.key_file,
                                                     ": OpenSSL refuses them for TLS here (", SslError(), ")"));
    }
    // What each handshake would find, said before anything starts (else every worker fails
    // after --connect-timeout).
    if (launcher && !o.ca_file.empty()) {
      if (absl::Status s = VerifyAgainstCa(o, cert->get()); !s.ok()) return s;
    }
    if (side == TlsSide::kLocalLauncher) {
      const std::string& name = o.server_name.empty() ? std::string("127.0.0.1") : o.server_name;
      // An address by its IP names only (gRPC takes no common name for one), a host name as
      // gRPC checks it (its DNS names, else the common name).
      const int ip = X509_check_ip_asc(cert->get(), name.c_str(), 0);
      const bool named = ip == 1 || (ip == -2 && X509_check_host(cert->get(), name.data(), name.size(), 0, nullptr) == 1);
      ERR_clear_error();
      if (!named) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--tls-cert=", o.cert_file, " does not name ", name,
            o.server_name.empty() ? ", the address psbench run's workers dial: issue it for IP 127.0.0.1 or give "
                                    "--tls-server-name=NAME it names"
                                  : " (--tls-server-name)"));
      }
    }
  }
  return o;
}

std::vector<std::string> TlsCommandLine(const TlsOptions& o, TlsSide to) {
  auto absolute = [](const std::string& path) {
    std::error_code ec;
    auto p = std::filesystem::absolute(path, ec);
    return ec ? path : p.string();
  };
  std::vector<std::string> args;
  if (!o.cert_file.empty()) args.push_back("--tls-cert=" + absolute(o.cert_file));
  if (!o.key_file.empty()) args.push_back("--tls-key=" + absolute(o.key_file));
  if (!o.ca_file.empty()) args.push_back("--tls-ca=" + absolute(o.ca_file));
  if (!o.server_name.empty() && to != TlsSide::kServer) {
    args.push_back("--tls-server-name=" + o.server_name);
  }
  return args;
}

}  // namespace psbench
