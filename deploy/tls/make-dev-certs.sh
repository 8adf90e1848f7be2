#!/usr/bin/env bash
# Make a development CA and a server certificate it signs, for `ldpcollect serve --tls-cert`.
#
#   deploy/tls/make-dev-certs.sh OUT_DIR HOST [HOST...]
#
# HOST is a DNS name or an IP address; each goes into the certificate's subject alternative
# names (clients check the name they dial against it). 127.0.0.1 and localhost are always
# added. Writes OUT_DIR/ca.pem (give it to clients: --tls-ca / LDPCOLLECT_TLS_CA),
# OUT_DIR/ca.key (keep it offline), OUT_DIR/server.pem and OUT_DIR/server.key (the server's;
# mode 600). For a real pilot use certificates from your own CA or ACME; this CA is for tests.
set -euo pipefail

if [[ $# -lt 2 ]]; then
    echo "usage: $0 OUT_DIR HOST [HOST...]" >&2
    exit 2
fi
out=$1
shift
days=${LDPCOLLECT_CERT_DAYS:-365}
command -v openssl >/dev/null || { echo "error: openssl not found" >&2; exit 1; }
mkdir -p "$out"
umask 077

san="DNS:localhost,IP:127.0.0.1"
for host in "$@"; do
    if [[ $host =~ ^[0-9.]+$ || $host == *:* ]]; then
        san="$san,IP:$host"
    elif [[ $host =~ ^[A-Za-z0-9.-]+$ ]]; then
        san="$san,DNS:$host"
    else
        echo "error: HOST must be a DNS name or an IP address, got '$host'" >&2
        exit 2
    fi
done

# The CA: EC P-256, basicConstraints CA:true, may sign certificates.
openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$out/ca.key" -out "$out/ca.pem" -days "$days" -sha256 \
    -subj "/CN=ldpcollect dev CA" \
    -addext "basicConstraints=critical,CA:true,pathlen:0" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

# The server key and a certificate for it, signed by the CA, naming every HOST.
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$out/server.key" -out "$out/server.csr" -subj "/CN=$1" 2>/dev/null
extensions=$(mktemp)
trap 'rm -f "$extensions" "$out/server.csr"' EXIT
cat >"$extensions" <<EXT
basicConstraints=critical,CA:false
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=$san
EXT
openssl x509 -req -in "$out/server.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" \
    -CAcreateserial -out "$out/server.pem" -days "$days" -sha256 -extfile "$extensions" 2>/dev/null
rm -f "$out/ca.srl"
chmod 644 "$out/ca.pem" "$out/server.pem"

echo "wrote $out/ca.pem (clients), $out/server.pem + $out/server.key (server), $out/ca.key (CA key)"
echo "subject alternative names: $san"
