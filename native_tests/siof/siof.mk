siof:
