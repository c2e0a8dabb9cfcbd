/** What a browser opens: the API reference (/docs, /v1/openapi.json) and the web console (/console). */
import { consoleRoutes } from '../http/routes/console.ts'
import { docsRoutes } from '../http/routes/docs.ts'
import { VERSION } from '../version.ts'
import { defineFeature } from './feature.ts'

export const docsFeature = () => defineFeature({ name: 'docs', routes: docsRoutes(VERSION), api: {} })

export const consoleFeature = () => defineFeature({ name: 'console', routes: consoleRoutes(), api: {} })
