"""Crawls as a first-class kind (docs/crawling.md).

A :class:`Crawler` is a batch automation whose tasks are a crawl's pages: the plugin
writes ``parse(page, ctx)`` yielding items and :class:`Link`s; Fleet fetches each page
once per run, politely per host for the whole fleet (``per_host_concurrency``,
``per_host_rate``, robots.txt and its ``Crawl-delay``), follows the links in scope,
reads sitemaps and, on a recrawl, asks only for what changed.
"""

from fleet.crawl.config import CrawlConfig
from fleet.crawl.crawler import Crawler, CrawlError, CrawlTask, seed_task
from fleet.crawl.page import Link, Page
from fleet.crawl.robots import RobotsUnavailable
from fleet.crawl.urls import canonical, host_of

__all__ = [
    "CrawlConfig",
    "CrawlError",
    "CrawlTask",
    "Crawler",
    "Link",
    "Page",
    "RobotsUnavailable",
    "canonical",
    "host_of",
    "seed_task",
]
