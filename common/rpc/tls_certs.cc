#include "common/rpc/tls_certs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs argv with stdout and stderr into `log`; OK when it exits 0.
absl::Status Run(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot run '", argv[0], "' to make the job's TLS certificates: install openssl "
        "(tools/setup.sh does) or give --tls_cert, --tls_key and --tls_ca"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("'", absl::StrJoin(argv, " "), "' failed: ",
                                            ReadAll(log)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobCertificates> MakeJobCertificates(const std::string& dir,
                                                    const JobCertificateOptions& o) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat("cannot create the certificate directory ", dir, ": ", std::strerror(errno)));
  }
  JobCertificates c;
  c.ca_file = dir + "/ca.pem";
  c.ca_key_file = dir + "/ca.key";
  c.cert_file = dir + "/node.pem";
  c.key_file = dir + "/node.key";
  c.server_name = o.server_name;
  const std::string csr = dir + "/node.csr", ext = dir + "/node.ext", log = dir + "/openssl.log";
  {
    std::ofstream out(ext);
    out << "basicConstraints=critical,CA:FALSE\n"
        << "keyUsage=critical,digitalSignature,keyEncipherment\n"
        << "extendedKeyUsage=serverAuth,clientAuth\n"
        << "subjectAltName=DNS:" << o.server_name << ",DNS:localhost,IP:127.0.0.1\n";
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", ext));
  }
  const std::string days = absl::StrCat(o.valid_days);
  const std::vector<std::vector<std::string>> steps = {
      {o.openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
       "-nodes", "-keyout", c.ca_key_file, "-out", c.ca_file, "-days", days, "-subj",
       "/CN=tandem job CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
       "keyUsage=critical,keyCertSign,cRLSign"},
      {o.openssl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
       "-keyout", c.key_file, "-out", csr, "-subj", "/CN=" + o.server_name},
      {o.openssl, "x509", "-req", "-in", csr, "-CA", c.ca_file, "-CAkey", c.ca_key_file,
       "-CAcreateserial", "-out", c.cert_file, "-days", days, "-extfile", ext},
  };
  for (const std::vector<std::string>& step : steps) {
    if (absl::Status s = Run(step, log); !s.ok()) return s;
  }
  for (const std::string& key : {c.ca_key_file, c.key_file}) {
    if (chmod(key.c_str(), 0600) != 0) {
      return absl::InternalError(absl::StrCat("chmod 0600 ", key, ": ", std::strerror(errno)));
    }
  }
  unlink(csr.c_str());
  return c;
}

}  // namespace tandem
