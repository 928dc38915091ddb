// An sshd of a test's own (Debian's openssh-server) on a loopback port: its own host key, the
// test's key authorized for root, and client configurations with known-hosts files of their own;
// the person's ~/.ssh is never read. Used by the remote engine suite and bench/remote.mjs.
import { execFileSync, spawn } from 'node:child_process'
import { chmodSync, copyFileSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'

import { run, waitFor } from './helpers.mjs'
import { alive, freePort } from './private-engine.mjs'

/** An sshd of the test's own on a loopback port: its own host key, the test's key authorized
 * for root, and a client config (`command`: ssh -F it) with its own known-hosts file. */
export async function privateSshd(t, dir) {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const keygen = (file) => execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'po-sandbox test', '-f', path.join(dir, file)])
  keygen('host_key')
  keygen('id')
  keygen('other_host_key')
  copyFileSync(path.join(dir, 'id.pub'), path.join(dir, 'authorized_keys'))
  chmodSync(path.join(dir, 'authorized_keys'), 0o600)
  const port = await freePort()
  const config = path.join(dir, 'sshd_config')
  writeFileSync(config, [
    `Port ${port}`, 'ListenAddress 127.0.0.1', `HostKey ${dir}/host_key`, `PidFile ${dir}/sshd.pid`,
    `AuthorizedKeysFile ${dir}/authorized_keys`, 'PasswordAuthentication no', 'KbdInteractiveAuthentication no',
    'PermitRootLogin prohibit-password', 'StrictModes no', 'UsePAM no', 'LogLevel VERBOSE', '',
  ].join('\n'))
  // sshd's privilege separation folder (the package's service makes it).
  mkdirSync('/run/sshd', { recursive: true, mode: 0o755 })
  const log = path.join(dir, 'sshd.log')
  const out = openSync(log, 'a')
  let child = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', config], { stdio: ['ignore', out, out] })
  const listening = () => waitFor(() => new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true) }).once('error', () => resolve(false))
  }), `the test sshd to listen (log: ${log})`, 10000)
  /** Ends the sshd and every session it serves (as a dropped connection or a rebooted machine would):
   * every sshd process under the listener (each connection's monitor and its session process, so no
   * connection outlives it), never the shells and commands the sessions ran: those see their
   * connection close, as on a real drop (a killed login shell can leave its start-up files' locks). */
  const stop = async () => {
    const pids = sshdTree(child.pid)
    for (const pid of pids) {
      try { process.kill(pid, 'SIGKILL') } catch {}
    }
    await waitFor(() => !pids.some(alive), 'the test sshd and its connections to exit', 10000)
  }
  const hostKey = readFileSync(path.join(dir, 'host_key.pub'), 'utf8').trim().split(' ').slice(0, 2).join(' ')
  const otherKey = readFileSync(path.join(dir, 'other_host_key.pub'), 'utf8').trim().split(' ').slice(0, 2).join(' ')
  const clientConfig = (name, knownHosts) => {
    const file = path.join(dir, `${name}_config`)
    writeFileSync(path.join(dir, `${name}_known_hosts`), knownHosts)
    writeFileSync(file, [
      'Host *', `  IdentityFile ${dir}/id`, '  IdentitiesOnly yes', `  UserKnownHostsFile ${dir}/${name}_known_hosts`,
      '  GlobalKnownHostsFile /dev/null', '',
    ].join('\n'))
    return `ssh -F ${file}`
  }
  const sshd = {
    port,
    log: () => readFileSync(log, 'utf8'),
    logins: () => (readFileSync(log, 'utf8').match(/Accepted publickey for root/g) ?? []).length,
    command: clientConfig('good', `[127.0.0.1]:${port} ${hostKey}\n`),
    // Another key recorded for the host (as after a reinstall, or someone in the middle).
    wrongKey: clientConfig('wrong', `[localhost]:${port} ${otherKey}\n`),
    // The host not recorded at all.
    unknown: clientConfig('unknown', ''),
    stop,
    /** The same sshd again, on the same port. */
    start: async () => {
      child = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', config], { stdio: ['ignore', out, out] })
      await listening()
    },
  }
  t.after(async () => {
    await run('ssh', [...sshd.command.split(' ').slice(1), '-p', String(port), '-O', 'exit', 'root@127.0.0.1']).catch(() => {})
    await run('pkill', ['-P', String(child.pid)])
    child.kill('SIGTERM')
    await waitFor(() => !alive(child.pid), 'the test sshd to exit', 10000)
  })
  await listening()
  await loginWorks(sshd, log)
  return sshd
}

/** The listener and its sshd descendants (pid first), from `ps`. */
function sshdTree(root) {
  const rows = execFileSync('ps', ['-e', '-o', 'pid=,ppid=,comm='], { encoding: 'utf8' }).trim().split('\n')
    .map((l) => l.trim().split(/\s+/)).map(([pid, ppid, comm]) => ({ pid: Number(pid), ppid: Number(ppid), comm }))
  const tree = [root]
  for (let i = 0; i < tree.length; i++) {
    for (const r of rows) if (r.ppid === tree[i] && r.comm === 'sshd') tree.push(r.pid)
  }
  return tree
}

/** A command over the test sshd runs in root's login shell, which reads root's shell start-up
 * files: one that hangs (a stale lock of a tool they start) would stall every SSH test, so it is
 * said here, once, with what to look at. */
async function loginWorks(sshd, log) {
  const args = [...sshd.command.split(' ').slice(1), '-p', String(sshd.port), '-o', 'BatchMode yes', 'root@127.0.0.1', 'true']
  const r = await run('timeout', ['20', 'ssh', ...args])
  if (r.code === 0) return
  throw new Error(`\`ssh … root@127.0.0.1 true\` through the test sshd ${r.code === 124 ? 'did not finish in 20 s' : `failed (exit ${r.code}): ${r.stderr.trim()}`}. `
    + 'It runs root\'s login shell, which reads ~/.bashrc even without a terminal: run `bash -xc "source ~/.bashrc"` '
    + `to see what hangs (for example a stale /root/.pyenv/shims/.pyenv-shim lock of pyenv rehash) and fix it. sshd log: ${log}`)
}
