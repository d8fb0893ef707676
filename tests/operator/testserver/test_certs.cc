#include "tests/operator/testserver/test_certs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <memory>
#include <stdexcept>

namespace headroom::testserver {
namespace {

struct PkeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Deleter {
  void operator()(X509* p) const { X509_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
using Cert = std::unique_ptr<X509, X509Deleter>;

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test PKI: ") + what + " failed");
}

Pkey NewKey() {
  Pkey key(EVP_EC_gen("P-256"));
  Check(key != nullptr, "EC key generation");
  return key;
}

void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  Check(ext != nullptr, "extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

Cert NewCert(EVP_PKEY* key, const char* cn, X509* issuer, EVP_PKEY* issuer_key, bool is_ca, const char* san) {
  static std::atomic<long> serial{1000};
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  if (is_ca) {
    AddExt(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    AddExt(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    AddExt(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    AddExt(cert.get(), signer, NID_key_usage, "critical,digitalSignature,keyEncipherment");
    AddExt(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  if (san) AddExt(cert.get(), signer, NID_subject_alt_name, san);
  Check(X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()) > 0, "signing");
  return cert;
}

std::string CertPem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

std::string KeyPem(EVP_PKEY* key) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

}  // namespace

TestPki TestPki::Generate() {
  TestPki pki;
  Pkey ca_key = NewKey();
  Cert ca = NewCert(ca_key.get(), "headroom-test-ca", nullptr, nullptr, true, nullptr);
  Pkey server_key = NewKey();
  Cert server = NewCert(server_key.get(), "127.0.0.1", ca.get(), ca_key.get(), false, "IP:127.0.0.1,DNS:localhost");
  Pkey client_key = NewKey();
  Cert client = NewCert(client_key.get(), "headroom-test-client", ca.get(), ca_key.get(), false, nullptr);
  pki.ca = {CertPem(ca.get()), KeyPem(ca_key.get())};
  pki.server = {CertPem(server.get()), KeyPem(server_key.get())};
  pki.client = {CertPem(client.get()), KeyPem(client_key.get())};
  return pki;
}

}  // namespace headroom::testserver
