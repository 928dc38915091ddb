'use strict'
// The pi extension of @agimon-ai/po-sandbox: thin glue, all logic lives in the Rust addon.
// The factory only registers; it starts no socket and no timer.
//
// Brokered providers: when the environment names brokered providers and a broker route, on
// `session_start` the extension starts the loopback bridge (socket route; a TCP route needs
// none) and re-registers each brokered provider with its own models, every model's base URL
// re-pointed at the broker by swapping only its origin (`brokeredBaseUrl`), so models on
// different base paths (openrouter's `/api` and `/api/v1`) keep theirs. The legacy
// `registerProvider(name, { models })` form keeps the built-in provider underneath: its
// streaming implementations, compat flags, headers, and its own key resolution (no `apiKey` is
// given), so the per-grant token in the key variable is sent exactly as the key would be. On
// `session_shutdown` the registrations are withdrawn (restoring the built-in models) and the
// bridge is closed. Brokered providers never stay on their real upstream: when the bridge
// fails, or the variables are inconsistent, they point at a closed loopback origin instead.
//
// Egress proxy (allowlist mode): when the environment names the egress socket
// (`PO_BROKER_EGRESS_SOCKET`), on `session_start` the extension bridges a second loopback port
// to it and sets `HTTPS_PROXY`, `HTTP_PROXY`, `https_proxy` and `http_proxy` to that port in
// pi's own environment, so the tools pi starts (bash: npm, git, curl, pip) inherit them;
// `NO_PROXY`/`no_proxy` keep loopback direct. On the TCP route (`PO_BROKER_EGRESS_PROXY`) the
// variables are set to that URL directly, with no bridge. On `session_shutdown` the variables are put back
// as they were and the bridge is closed.
//
// Denials, for the person: while a session with a UI runs behind the egress proxy, the
// extension asks the proxy for its container's denials (`GET http://po-sandbox.invalid/denials`,
// a name the proxy answers itself; it waits for the next denial and gathers a burst) and shows
// the notice each answer carries with `ctx.ui.notify`: to the person, never into the model's
// context. The notice names the host command that allows the destination. It stops on
// `session_shutdown`; its sockets and timers never keep pi running.
//
// Help resources: inside a container, on `resources_discover` the extension writes the help
// skill `po-sandbox` (its SKILL.md comes from the addon: `helpSkill`, the same variables as
// `/po-sandbox`) into a private temporary folder and offers that folder's skill to pi; on the
// host it offers nothing. The folder is removed on `session_shutdown`.

const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')

const { DefaultSandboxExtensionService, brokeredBaseUrl, brokerOrigin, startBrokerBridge } = require('../index.js')

const MODEL_TYPES = ['chat', 'image', 'classifier']
// Where brokered providers point when the broker cannot be reached: the discard port, closed.
const CLOSED_ORIGIN = 'http://127.0.0.1:9'
// Virtual models route to physical ones and have no endpoint of their own.
const VIRTUAL_MODEL_API = 'pi-virtual'
const PROXY_VARS = ['HTTPS_PROXY', 'HTTP_PROXY', 'https_proxy', 'http_proxy']
const NO_PROXY_VARS = ['NO_PROXY', 'no_proxy']
const LOOPBACK = ['localhost', '127.0.0.1', '::1']

/** Points the proxy variables at `url`; returns what they were. */
function setProxy(url) {
  const saved = {}
  for (const name of [...PROXY_VARS, ...NO_PROXY_VARS]) saved[name] = process.env[name]
  for (const name of PROXY_VARS) process.env[name] = url
  for (const name of NO_PROXY_VARS) {
    const have = (process.env[name] ?? '').split(',').map((s) => s.trim()).filter(Boolean)
    process.env[name] = [...new Set([...have, ...LOOPBACK])].join(',')
  }
  return saved
}

/** Puts the variables `setProxy` changed back. */
function restoreProxy(saved) {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name]
    else process.env[name] = value
  }
}

// The egress proxy answers this name itself: the container's recent denials.
const DENIALS = 'http://po-sandbox.invalid/denials'
// How long one ask waits for a denial (the proxy bounds it at 30 s), and the pause after a
// failed ask (the proxy restarting with the hub).
const DENIALS_WAIT_S = 25
const DENIALS_RETRY_MS = 2000

/** One ask of the denials through the proxy at `proxyUrl` (its credentials, on the TCP route, as Proxy-Authorization); resolves with the answer's JSON. */
function askDenials(proxyUrl, query, signal) {
  const proxy = new URL(proxyUrl)
  const headers = { host: 'po-sandbox.invalid' }
  if (proxy.username) {
    const pair = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`
    headers['proxy-authorization'] = `Basic ${Buffer.from(pair).toString('base64')}`
  }
  return new Promise((resolve, reject) => {
    const req = http.get({ host: proxy.hostname, port: proxy.port, path: DENIALS + query, headers, signal, agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d) => { body += d })
      res.on('error', reject)
      res.on('end', () => {
        try {
          if (res.statusCode !== 200) throw new Error(`the egress proxy answered ${res.statusCode}: ${body.trim()}`)
          resolve(JSON.parse(body))
        } catch (err) {
          reject(err)
        }
      })
    })
    req.on('socket', (socket) => socket.unref())
    req.on('error', reject)
  })
}

/** Shows `notify` each batch of the container's denials from now on, until `signal` aborts. */
async function watchDenials(proxyUrl, notify, signal) {
  let next
  while (!signal.aborted) {
    try {
      const query = next === undefined ? '' : `?after=${next}&wait=${DENIALS_WAIT_S}`
      const answer = await askDenials(proxyUrl, query, signal)
      if (next !== undefined && answer.notice) notify(answer.notice)
      next = answer.next
    } catch {
      if (signal.aborted) return
      await new Promise((resolve) => setTimeout(resolve, DENIALS_RETRY_MS).unref())
    }
  }
}

function egressError(err) {
  return new Error(`Po sandbox: the egress proxy bridge could not start (${err.message}); this session's tools have no way out until it can.`)
}

/** @param {import('@earendil-works/pi-coding-agent').ExtensionAPI} pi */
function poSandboxExtension(pi) {
  /** @type {{ bridge?: { close(): Promise<void> }, egress?: { close(): Promise<void> }, proxySaved?: Record<string, string | undefined>, denials?: AbortController, providers: string[] } | undefined} */
  let active

  async function release() {
    const current = active
    active = undefined
    if (!current) return
    for (const name of current.providers) pi.unregisterProvider(name)
    current.denials?.abort()
    if (current.proxySaved) restoreProxy(current.proxySaved)
    await current.bridge?.close()
    await current.egress?.close()
  }

  /** @type {string | undefined} the folder holding the help skill, while offered */
  let skillRoot

  function removeSkill() {
    if (skillRoot) fs.rmSync(skillRoot, { recursive: true, force: true })
    skillRoot = undefined
  }

  pi.on('resources_discover', async (event) => {
    const skill = new DefaultSandboxExtensionService(process.env).helpSkill(event.cwd)
    if (skill === null) {
      removeSkill()
      return {}
    }
    skillRoot ??= fs.mkdtempSync(path.join(os.tmpdir(), 'po-sandbox-help-'))
    const dir = path.join(skillRoot, 'po-sandbox')
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    fs.writeFileSync(path.join(dir, 'SKILL.md'), skill, { mode: 0o600 })
    return { skillPaths: [dir] }
  })

  pi.registerCommand('po-sandbox', {
    description: 'Show whether this session runs inside a Po sandbox container, and its brokered providers',
    handler: async (_args, ctx) => {
      const service = new DefaultSandboxExtensionService(process.env)
      const level = service.state().problems.length > 0 ? 'warning' : 'info'
      ctx.ui.notify(service.report(), level)
    },
  })

  pi.on('session_start', async (_event, ctx) => {
    await release()
    const state = new DefaultSandboxExtensionService(process.env).state()
    active = { providers: [] }
    let egressFailure
    if (state.egressSocket) {
      try {
        active.egress = await startBrokerBridge(state.egressSocket)
        active.proxySaved = setProxy(active.egress.url)
      } catch (err) {
        egressFailure = err
      }
    } else if (state.egressProxyRoute) {
      // The TCP route (VM engines): the host's egress port, reached directly, no bridge.
      active.proxySaved = setProxy(state.egressProxyRoute)
    }
    const proxyUrl = active.egress?.url ?? state.egressProxyRoute
    if (proxyUrl && ctx.hasUI) {
      const denials = new AbortController()
      active.denials = denials
      const notify = (text) => {
        try {
          ctx.ui.notify(text, 'warning')
        } catch {
          denials.abort() // a session replaced under it
        }
      }
      void watchDenials(proxyUrl, notify, denials.signal)
    }
    // Providers named for the broker whose variables are inconsistent (a missing workspace, a
    // bad route) fail closed as well: their key variables hold grant tokens, not keys.
    const inconsistent = !state.brokered && state.brokeredProviders.length > 0
    if (!inconsistent && (!state.brokered || !state.route)) {
      if (egressFailure) throw egressError(egressFailure)
      return
    }
    let bridge
    let origin
    let blocked
    if (inconsistent) {
      blocked = `brokered providers (${state.brokeredProviders.join(', ')}) are blocked until the sandbox variables are consistent: ${state.problems.join(' ')}`
      origin = CLOSED_ORIGIN
    } else {
      try {
        bridge = state.route.kind === 'socket' ? await startBrokerBridge(state.route.target) : undefined
        origin = brokerOrigin(state.route, bridge?.port)
      } catch (err) {
        // Fail closed: brokered providers point at a closed loopback port, so no request (and
        // no token) leaves for the real upstream while the broker cannot be reached.
        blocked = `the broker bridge could not start (${err.message}); brokered providers are blocked until it can.`
        origin = CLOSED_ORIGIN
      }
    }
    active.bridge = bridge
    const skipped = []
    for (const name of state.brokeredProviders) {
      const registry = ctx.modelRegistry
      const found = MODEL_TYPES.flatMap((type) =>
        registry.getModelsOfType(type, name).filter((m) => m.api !== VIRTUAL_MODEL_API).map((m) => ({ ...m, type })),
      )
      if (found.length === 0) continue
      const models = []
      for (const { provider: _provider, ...model } of found) {
        try {
          models.push({ ...model, baseUrl: brokeredBaseUrl(model.baseUrl ?? '', name, origin) })
        } catch (err) {
          // Withdrawn rather than left pointing at its real upstream with a token.
          skipped.push(`${name}/${model.id}: ${err.message}`)
        }
      }
      let baseUrl
      try {
        baseUrl = brokeredBaseUrl(registry.getProvider(name)?.baseUrl ?? '', name, origin)
      } catch {
        baseUrl = undefined
      }
      pi.registerProvider(name, { ...(baseUrl ? { baseUrl } : {}), models })
      active.providers.push(name)
    }
    if (skipped.length > 0 && ctx.hasUI) {
      ctx.ui.notify(`Po sandbox: these models cannot be brokered and were withdrawn:\n${skipped.join('\n')}`, 'warning')
    }
    if (blocked) throw new Error(`Po sandbox: ${blocked}`)
    if (egressFailure) throw egressError(egressFailure)
  })

  pi.on('session_shutdown', async () => {
    removeSkill()
    await release()
  })
}

module.exports = poSandboxExtension
module.exports.default = poSandboxExtension
