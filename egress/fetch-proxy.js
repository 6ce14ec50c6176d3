// codeagent egress: node's fetch (undici) ignores HTTP_PROXY before node 24;
// this preload (NODE_OPTIONS=--require) routes it through the proxy that the
// sandbox's environment names, with CONNECT for every host, as curl does.
'use strict';
(() => {
  const proxy = process.env.HTTPS_PROXY || process.env.https_proxy || process.env.HTTP_PROXY || process.env.http_proxy;
  const sym = Symbol.for('undici.globalDispatcher.1');
  if (!proxy || typeof fetch !== 'function' || globalThis[sym]) return;
  try {
    // An aborted fetch makes undici create its Agent without touching the network.
    fetch('http://127.0.0.1/', { signal: AbortSignal.abort() }).catch(() => {});
  } catch (e) { return; }
  const Agent = globalThis[sym] && globalThis[sym].constructor;
  if (typeof Agent !== 'function') return;
  const net = require('net');
  const tls = require('tls');
  const p = new URL(proxy);
  const noProxy = (process.env.NO_PROXY || process.env.no_proxy || '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
  const direct = (host) => noProxy.some((n) => n === '*' || host === n || host.endsWith(n.startsWith('.') ? n : '.' + n));
  function connect(opts, cb) {
    const host = String(opts.hostname).replace(/^\[|\]$/g, '');
    const port = Number(opts.port) || (opts.protocol === 'https:' ? 443 : 80);
    const secure = (sock) => {
      if (opts.protocol !== 'https:') return cb(null, sock);
      const t = tls.connect({ socket: sock, servername: opts.servername || (net.isIP(host) ? undefined : host), ALPNProtocols: ['http/1.1'] });
      t.once('secureConnect', () => cb(null, t));
      t.once('error', (e) => cb(e));
    };
    if (direct(host.toLowerCase())) {
      const s = net.connect(port, host);
      s.once('connect', () => secure(s));
      s.once('error', (e) => cb(e));
      return;
    }
    const s = net.connect(Number(p.port) || 80, p.hostname);
    s.once('error', (e) => cb(e));
    s.once('connect', () => {
      const target = net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
      s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
      let buf = Buffer.alloc(0);
      const onData = (d) => {
        buf = Buffer.concat([buf, d]);
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) { if (buf.length > 65536) s.destroy(new Error('proxy: header too large')); return; }
        s.removeListener('data', onData);
        s.pause();
        const status = buf.slice(0, buf.indexOf('\r\n')).toString();
        if (!/^HTTP\/1\.[01] 200/.test(status)) {
          s.destroy();
          return cb(new Error(`proxy refused ${target}: ${status.replace(/^HTTP\/1\.[01] /, '')}`));
        }
        const rest = buf.slice(end + 4);
        if (rest.length) s.unshift(rest);
        secure(s);
      };
      s.on('data', onData);
    });
  }
  globalThis[sym] = new Agent({ connect });
})();
