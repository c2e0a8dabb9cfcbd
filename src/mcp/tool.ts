/**
 * How every bridge tool is declared and answers: an input and an output schema, annotations, and a
 * handler that returns the structured result. A success carries it as structuredContent and as JSON
 * text; a failure is a result with isError — the relay's code and message when the relay refused, the
 * relay's URL when it could not be reached — never a protocol error or a stack trace.
 */
import type { CallToolResult, McpServer, ServerContext, ToolAnnotations } from '@modelcontextprotocol/server'
import { z } from 'zod'
import { DecryptError, NotARelayError, RelayApiError, RelayConnectionError } from '../client/index.ts'
import { relayPathHint } from '../client/transport.ts'

export type ToolExtra = ServerContext

/** Reads the relay and changes nothing. */
export const READS: ToolAnnotations = { readOnlyHint: true, openWorldHint: false }
/** Reaches another agent: it cannot be taken back. */
export const SENDS: ToolAnnotations = { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true }
/**
 * Deletes, blocks, replaces or ends something on the relay: what was there before is not got back (MCP's
 * destructive: more than an additive update). Acknowledging a message and replacing profile fields are too.
 */
export const DESTROYS: ToolAnnotations = { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false }

export interface ToolSpec<I extends z.ZodRawShape, O extends z.ZodRawShape> {
  title: string
  description: string
  input: I
  output: O
  annotations: ToolAnnotations
  run: (args: z.output<z.ZodObject<I>>, extra: ToolExtra) => Promise<z.output<z.ZodObject<O>>>
}

export function defineTool<I extends z.ZodRawShape, O extends z.ZodRawShape>(server: McpServer, name: string, spec: ToolSpec<I, O>): void {
  const handler = async (args: unknown, extra: ToolExtra): Promise<CallToolResult> => {
    try {
      return success((await spec.run(args as z.output<z.ZodObject<I>>, extra)) as Record<string, unknown>)
    } catch (err) {
      return failure(err)
    }
  }
  server.registerTool(
    name,
    {
      title: spec.title,
      description: spec.description,
      inputSchema: z.object(spec.input),
      outputSchema: z.object(spec.output),
      annotations: { title: spec.title, ...spec.annotations },
    },
    handler as never,
  )
}

export function success(structured: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(structured, null, 2) }], structuredContent: structured }
}

/** What a not_found answer adds when the bridge's --relay URL has a path (…/v1), as the CLI says it; one per process. */
let relayHint: string | undefined

/** The relay URL of this process's bridge, for the hint above; returns the hint, if any. */
export function setRelayUrl(relayUrl: string): string | undefined {
  relayHint = relayPathHint(relayUrl)
  return relayHint
}

/** The text of a failed call, for a model to read and act on. */
export function describeError(err: unknown): string {
  if (err instanceof RelayApiError) {
    let text = `The relay refused the request: ${err.code}: ${err.message}`
    if (err.status) text += ` (HTTP ${err.status}${err.requestId ? `, request ${err.requestId}` : ''})`
    if (err.details !== null && err.details !== undefined) text += `\ndetails: ${JSON.stringify(err.details)}`
    if (err.code === 'not_found' && relayHint) text += `\nhint: ${relayHint}`
    return text
  }
  if (err instanceof RelayConnectionError || err instanceof NotARelayError) return err.message
  // the reason is what a model can act on: not for this key, changed on the way, cut short (docs/protocol.md §14.7)
  if (err instanceof DecryptError) return `Decryption failed (${err.reason}): ${err.message}. Nothing decrypted was kept.`
  return `Error: ${(err as Error)?.message ?? String(err)}`
}

export function failure(err: unknown): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: describeError(err) }] }
}
