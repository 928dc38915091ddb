'use strict'
// `@agimon-ai/po-sandbox/apiContracts`: this package's API contract for Po, as seed 001 shipped
// it. The layer contributes an agent command, a skill and provider overrides only, with no
// separate HTTP or socket surface. The ESM entry (apiContracts.mjs) re-exports this object.

const freeze = (value) => {
  for (const v of Object.values(value)) if (typeof v === 'object' && v !== null) freeze(v)
  return Object.freeze(value)
}

/** This facet contributes agent tools, commands or lifecycle only, with no separate HTTP or socket surface. */
const apiContracts = freeze({ version: 1, http: [], sockets: [], dynamic: [] })

Object.defineProperty(exports, '__esModule', { value: true })
exports.apiContracts = apiContracts
exports.default = apiContracts
