// Fake model providers on 127.0.0.1 for end-to-end tests: one node:http server (port 0) that
// records every request and answers the three wire formats pi speaks to the brokered providers
// in the tests with a short streamed reply, a few SSE events apart:
//
// - Anthropic Messages: POST …/v1/messages (anthropic; openrouter's `https://openrouter.ai/api`
//   models, e.g. `anthropic/claude-haiku-4.5`; fireworks' and opencode's `/inference` models)
// - OpenAI Chat Completions: POST …/chat/completions (groq, deepseek, openrouter's `/api/v1`
//   models, …)
// - OpenAI Responses: POST …/responses (the `openai` provider's models)
//
// Anything else gets a 404 (and is recorded too). The reply text is `pong from <name>`, where
// `name` is given when the upstream starts, so a test can tell which upstream answered.
// `modelRequest` checks the one model request an upstream saw: the real key, never the token.
import assert from 'node:assert/strict'
import http from 'node:http'

/**
 * Starts a fake upstream. Resolves with
 * `{ port, origin, requests, reply, close() }`: `requests` fills with
 * `{ method, url, path, headers, body, api }` per request (`api`: 'anthropic-messages',
 * 'openai-completions', 'openai-responses' or undefined for a 404), `reply` is the streamed text.
 * Pass `t` (a node:test context) to close it when the test ends.
 */
export async function startUpstream({ name = 'upstream', delayMs = 15, t } = {}) {
  const requests = []
  const reply = `pong from ${name}`
  const sockets = new Set()
  const server = http.createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (d) => { body += d })
    req.on('end', () => {
      const path = new URL(req.url, 'http://x').pathname
      const api = apiOf(req.method, path)
      let json
      try { json = body ? JSON.parse(body) : undefined } catch { json = undefined }
      requests.push({ method: req.method, url: req.url, path, headers: { ...req.headers }, body: json ?? body, api })
      if (!api) {
        res.writeHead(404, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ error: { message: `fake upstream ${name}: no route for ${req.method} ${path}` } }))
        return
      }
      streamReply(res, api, reply, json?.model ?? 'model', delayMs).catch(() => res.destroy())
    })
  })
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)) })
  await new Promise((resolve, reject) => server.listen(0, '127.0.0.1', resolve).once('error', reject))
  const { port } = server.address()
  let closed
  const upstream = {
    port,
    origin: `http://127.0.0.1:${port}`,
    name,
    reply,
    requests,
    close() {
      closed ??= new Promise((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      })
      return closed
    },
  }
  t?.after(() => upstream.close())
  return upstream
}

/**
 * The one model request `upstream` saw, after checking it: its wire format (`api`) and `path`,
 * the real `key` in `header` (`authorization` as a Bearer, or `x-api-key`) and not in the other
 * one, and the container's `token` nowhere in any request's headers or URL.
 */
export function modelRequest(upstream, { key, token, header, api, path: expectedPath }) {
  const calls = upstream.requests.filter((r) => r.api)
  assert.equal(calls.length, 1, `expected one model request, got: ${JSON.stringify(upstream.requests.map((r) => `${r.method} ${r.url}`))}`)
  const [req] = calls
  assert.equal(req.api, api)
  assert.equal(req.path, expectedPath)
  const expected = header === 'authorization' ? `Bearer ${key}` : key
  assert.equal(req.headers[header], expected, `the upstream saw ${header}: ${req.headers[header]}`)
  for (const r of upstream.requests) {
    assert.ok(!JSON.stringify(r.headers).includes(token), `the upstream saw the token in ${r.method} ${r.url}`)
    assert.ok(!r.url.includes(token), 'the upstream saw the token in the URL')
  }
  if (header === 'x-api-key') assert.equal(req.headers.authorization, undefined)
  if (header === 'authorization') assert.equal(req.headers['x-api-key'], undefined)
  return req
}

function apiOf(method, path) {
  if (method !== 'POST') return undefined
  if (path.endsWith('/v1/messages')) return 'anthropic-messages'
  if (path.endsWith('/chat/completions')) return 'openai-completions'
  if (path.endsWith('/responses')) return 'openai-responses'
  return undefined
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The reply in three pieces, so the client sees several deltas. */
function pieces(text) {
  const words = text.split(' ')
  return [`${words[0]} `, `${words.slice(1, -1).join(' ')} `, words.at(-1)]
}

async function streamReply(res, api, text, model, delayMs) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
  const send = async (event, data) => {
    res.write(`${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`)
    await sleep(delayMs)
  }
  const parts = pieces(text)
  if (api === 'anthropic-messages') {
    await send('message_start', {
      type: 'message_start',
      message: { id: 'msg_fake_1', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 7, output_tokens: 1 } },
    })
    await send('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } })
    for (const p of parts) await send('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: p } })
    await send('content_block_stop', { type: 'content_block_stop', index: 0 })
    await send('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: parts.length } })
    await send('message_stop', { type: 'message_stop' })
  } else if (api === 'openai-completions') {
    const chunk = (delta, finish = null, extra = {}) => ({ id: 'chatcmpl-fake-1', object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model, choices: [{ index: 0, delta, finish_reason: finish }], ...extra })
    await send(undefined, chunk({ role: 'assistant', content: '' }))
    for (const p of parts) await send(undefined, chunk({ content: p }))
    await send(undefined, chunk({}, 'stop'))
    await send(undefined, { id: 'chatcmpl-fake-1', object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model, choices: [], usage: { prompt_tokens: 7, completion_tokens: parts.length, total_tokens: 7 + parts.length } })
    await send(undefined, '[DONE]')
  } else {
    const response = (status, output = [], usage = null) => ({ id: 'resp_fake_1', object: 'response', created_at: Math.floor(Date.now() / 1000), status, model, output, usage })
    const item = (status, content) => ({ id: 'msg_fake_1', type: 'message', status, role: 'assistant', content })
    await send('response.created', { type: 'response.created', sequence_number: 0, response: response('in_progress') })
    await send('response.output_item.added', { type: 'response.output_item.added', sequence_number: 1, output_index: 0, item: item('in_progress', []) })
    await send('response.content_part.added', { type: 'response.content_part.added', sequence_number: 2, item_id: 'msg_fake_1', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } })
    let seq = 3
    for (const p of parts) await send('response.output_text.delta', { type: 'response.output_text.delta', sequence_number: seq++, item_id: 'msg_fake_1', output_index: 0, content_index: 0, delta: p })
    const done = item('completed', [{ type: 'output_text', text, annotations: [] }])
    await send('response.output_text.done', { type: 'response.output_text.done', sequence_number: seq++, item_id: 'msg_fake_1', output_index: 0, content_index: 0, text })
    await send('response.output_item.done', { type: 'response.output_item.done', sequence_number: seq++, output_index: 0, item: done })
    await send('response.completed', {
      type: 'response.completed',
      sequence_number: seq++,
      response: response('completed', [done], { input_tokens: 7, output_tokens: parts.length, total_tokens: 7 + parts.length, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } }),
    })
  }
  res.end()
}
