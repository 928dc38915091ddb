// Types of `@agimon-ai/po-sandbox/apiContracts` (ESM): the CommonJS declarations, re-exported.
export type { ApiContract } from './apiContracts.cjs'
export { apiContracts, apiContracts as default } from './apiContracts.cjs'
